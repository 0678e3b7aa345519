"""Shared bits of the benchmarks: percentiles and the one-JSON-line result convention."""

from __future__ import annotations

import json
import math
import platform
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; `values` need not be sorted."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def finish(name: str, figures: dict[str, Any]) -> None:
    """Write figures to bench/results/<name>.json and print them as the last line."""
    figures = {
        "benchmark": name,
        **figures,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(figures, indent=2) + "\n")
    sys.stdout.write(json.dumps(figures) + "\n")
    sys.stdout.flush()


def configmap(name: str, namespace: str, **data: str) -> dict[str, Any]:
    """A ConfigMap to create, for the benches that watch ConfigMaps."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
