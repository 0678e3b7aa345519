"""bench/results/ holds today's figures only: one file per row of bench/README.md's table,
each under the name its script writes (no commit hashes, no pools of old runs), so a reader
can tell which figure is current. A new run replaces its file and its row."""

from __future__ import annotations

import json
import re

import pytest

from tests.tools import REPO

pytestmark = pytest.mark.unit

RESULTS = REPO / "bench" / "results"
_ROW = re.compile(r"^\| `([\w.-]+\.json)` \| `(bench/[\w]+\.py)[^`]*` \| [^|]+ \|$", re.M)


def _table() -> dict[str, str]:
    """File -> the script of its command, from the README's table."""
    return dict(_ROW.findall((REPO / "bench" / "README.md").read_text()))


def test_each_result_file_is_a_row_of_the_table_and_each_row_has_its_file() -> None:
    rows = _table()
    files = {p.name for p in RESULTS.glob("*.json")}
    assert {"scale-100.json", "scale-1000.json", "upgrade.json"} <= files
    assert files == set(rows), (
        f"in bench/results but not in the README's table: {sorted(files - set(rows))}; "
        f"in the table with no file: {sorted(set(rows) - files)}"
    )


def test_each_file_is_named_as_its_script_writes_it() -> None:
    """`finish(name, ...)` writes `<name>.json` with `"benchmark": name`: a file renamed by
    hand (a commit hash, a session) no longer matches its own benchmark field."""
    for name, script in _table().items():
        written = json.loads((RESULTS / name).read_text())["benchmark"]
        assert f"{written}.json" == name, f"{name} holds the figures of {written}"
        assert (REPO / script).is_file(), f"{name}: {script} does not exist"
