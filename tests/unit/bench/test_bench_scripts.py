"""Every benchmark still imports against today's packages. Benchmarks are run by hand, so
without this a renamed function is found only when someone needs the figures
(bench/scale.py imported a label helper that had gone)."""

from __future__ import annotations

import subprocess
import sys

from tests.tools import REPO

BENCH = REPO / "bench"


def test_every_benchmark_module_imports() -> None:
    names = sorted(p.stem for p in BENCH.glob("*.py"))
    assert {"scale", "upgrade", "churn"} <= set(names)
    code = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    result = subprocess.run(
        [sys.executable, "-c", code, *names],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH,
        env={"PYTHONPATH": str(BENCH), "PATH": ""},
    )
    assert result.returncode == 0, result.stderr[-2000:]
