"""The documents tell the truth about the repository: the architecture page's layer order is
the import contract's, and nothing in src/, docs/ or README.md points a reader at a file or
document the repository does not have (a reader who follows it finds nothing)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
LAYERS_INTRO = re.compile(r"Inside\s+`components`\s+the\s+layers\s+are:")

#: Top-level folders a reference may start with; a path under one of them must exist.
TOP_LEVEL = ("src", "docs", "bench", "hack", "config", "deployments", "tests", ".ci")
_TOPS = "|".join(re.escape(t) for t in TOP_LEVEL)
_PATH = re.compile(rf"(?<![\w./~-])((?:{_TOPS})/[\w./-]*[\w/])")
#: A Markdown document named on its own (`README.md`, `docs/x.md` is caught above).
_DOCUMENT = re.compile(r"(?<![\w./-])([A-Za-z][\w-]*\.md)\b")
#: A design document cited by name: the repository's design is docs/ (none called DESIGN).
_DESIGN = re.compile(r"\bDESIGN\b")


def _layers_contract() -> list[set[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("containers") == ["components"]]
    return [{part.strip() for part in layer.split("|")} for layer in contract["layers"]]


def _layers_documented(text: str) -> list[set[str]]:
    """The first column of the fenced block after `LAYERS_INTRO` (continuation lines, which
    start with a space, left out)."""
    after = LAYERS_INTRO.split(text, 1)[1]
    block = after.split("```", 2)[1]
    rows = [line for line in block.splitlines()[1:] if line and not line[0].isspace()]
    return [{part.strip() for part in re.split(r"\s{2,}", row)[0].split("|")} for row in rows]


def test_the_architecture_page_lists_the_layers_of_the_import_contract() -> None:
    documented = _layers_documented(ARCHITECTURE.read_text())
    contract = _layers_contract()
    assert documented == contract, (
        f"docs/architecture.md lists the layers {documented}, pyproject.toml's contract "
        f"{contract}: change the page in the same change as the contract"
    )


def test_a_layer_order_that_differs_is_seen() -> None:
    """The parser reads the block it is meant to read: swapping two rows changes its
    answer (so the test above cannot pass on an empty or misread block)."""
    text = ARCHITECTURE.read_text()
    documented = _layers_documented(text)
    assert len(documented) >= 4
    first, second = (
        line for line in LAYERS_INTRO.split(text, 1)[1].split("```", 2)[1].splitlines()[1:3]
    )
    swapped = text.replace(f"{first}\n{second}\n", f"{second}\n{first}\n", 1)
    assert _layers_documented(swapped) != documented


def _sources() -> Iterator[Path]:
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").rglob("*.md"))
    yield from sorted((REPO / "src").rglob("*.py"))


def _missing(path: Path, text: str) -> Iterator[str]:
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path.relative_to(REPO)}:{number}"
        for match in _PATH.finditer(line):
            target = match.group(1).rstrip("/.")
            if any(c in target for c in "*<>{}") or (REPO / target).exists():
                continue
            yield f"{where}: {target} does not exist"
        for match in _DOCUMENT.finditer(line):
            name = match.group(1)
            if not (path.parent / name).exists() and not (REPO / name).exists():
                yield f"{where}: {name} does not exist"
        if _DESIGN.search(line):
            yield f"{where}: cites a DESIGN document the repository does not have"


def test_references_name_files_and_documents_that_exist() -> None:
    missing = [m for path in _sources() for m in _missing(path, path.read_text())]
    assert not missing, "\n".join(missing)


def test_a_reference_to_a_missing_file_is_seen() -> None:
    text = "see `docs/nowhere.md`, hack/generate-crds.sh, GONE.md and DESIGN section 3\n"
    found = list(_missing(REPO / "README.md", text))
    assert [f.split(": ", 1)[1] for f in found] == [
        "docs/nowhere.md does not exist",
        "GONE.md does not exist",
        "cites a DESIGN document the repository does not have",
    ]
