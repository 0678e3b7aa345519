"""Pool the pairs of several `scale.py` result files and say how sure their ratio is.

One pair's ratio varies by +-20% on this VM (machine speed spells, a control plane that
falls behind its leases on some runs and not others), so a median of three pairs can land
either side of a 1.05 target by luck. This takes every pair of the files given (runs of
the same code, by the caller's choice), and per cluster size and per ratio prints the
median, the mean and a 90% bootstrap interval of each: a target is met with confidence
when the interval's upper end is under it, missed when its lower end is over it, and
otherwise the pairs cannot tell yet. The interval's width also says how many more pairs a
claim needs (it narrows with the square root of their number).

Beside the times, each pair's CPU says what the operator's run cannot beat on a machine its
floor already keeps busy (`cpu_bound`): the ratio its own CPU and the work its label writes
cause elsewhere add to the floor's CPU, and, per target, how much CPU the operator may spend
to reach ready and still meet it on average.

    .venv/bin/python bench/pairs.py bench/results/scale-1000.json ... \
        [--target 100=1.10 --target 1000=1.05] [--name pairs-1000]

Writes bench/results/<name>.json (default `pairs`) and prints it as the last line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish, percentile

RECORDED = (
    "ratio",
    "ratio_at_equal_speed",
    "ratio_to_labelled_floor",
    "ratio_to_labelled_floor_at_equal_speed",
    "reference_ratio",
    "reference_ratio_at_equal_speed",
)
"""The ratios `scale.py` records per pair (the labelled ones only where a run had that
floor): ours, and NVIDIA's operator's where it ran (`--reference`), on the same terms, to
tell a target the reference itself misses on this machine."""
CPU_BOUND = "ratio_cpu_bound"
JUDGED = (*RECORDED, CPU_BOUND)
"""The ratios a target judges: those, and the bound the CPU alone puts on ours
(`cpu_bound`, computed here)."""
RATIOS = (*RECORDED, "labelled_floor_ratio")
"""Read from each pair: those, and the labelled floor's own ratio to the floor, reported
without a verdict."""
TO_REFERENCE = ("ratio_to_reference", "ratio_to_reference_at_equal_speed")
"""Ours over NVIDIA's operator in the same repeat, computed here from the two runs."""
TO_LABELLED = (
    "ratio_to_labelled_floor",
    "ratio_to_labelled_floor_at_equal_speed",
    "labelled_floor_ratio",
)
"""The ratios that involve the labelled floor: left out of a run whose labelled floor had a
process alongside (`scale.py --burn-share`, `--watchers`), which is no longer that floor."""
ALONGSIDE = ("burn_share", "watchers")

NOT_LABEL_WORK = ("operator", "bench")
"""Processes whose CPU in the operator's label phase is not the label writes' cost to the
cluster: the operator's own is in its CPU to ready, the benchmark's is its watching."""
CPU_BUDGET = "operator_cpu_budget_seconds"
OWN_CPU = "operator_cpu_seconds"

RESAMPLES = 10_000
CONFIDENCE = 90


def interval(
    values: Sequence[float], statistic: Callable[[Sequence[float]], float], seed: int = 14
) -> tuple[float, float]:
    """A `CONFIDENCE`% percentile-bootstrap interval of `statistic` over `values`."""
    rng = random.Random(seed)
    n = len(values)
    draws = [statistic([values[rng.randrange(n)] for _ in range(n)]) for _ in range(RESAMPLES)]
    tail = (100 - CONFIDENCE) / 2
    return percentile(draws, tail), percentile(draws, 100 - tail)


def verdict(low: float, high: float, target: float | None) -> str:
    if target is None:
        return ""
    if high <= target:
        return "met"
    if low > target:
        return "missed"
    return "cannot tell"


def summary(values: list[float], target: float | None) -> dict[str, Any]:
    median_ci = interval(values, statistics.median)
    mean_ci = interval(values, statistics.fmean)
    return {
        "pairs": len(values),
        "each": values,
        "median": round(statistics.median(values), 3),
        "median_interval": [round(v, 3) for v in median_ci],
        "mean": round(statistics.fmean(values), 3),
        "mean_interval": [round(v, 3) for v in mean_ci],
        "target": target,
        "by_mean": verdict(*mean_ci, target),
    }


def pooled(files: Sequence[Path], targets: dict[int, float]) -> dict[str, Any]:
    by_size: dict[int, dict[str, list[float]]] = {}
    for path in files:
        for run in json.loads(path.read_text()).get("runs", []):
            ratios = by_size.setdefault(int(run["nodes"]), {})
            labelled = run.get("labelled_floor") or {}
            skipped = TO_LABELLED if any(k in labelled for k in ALONGSIDE) else ()
            for key in RATIOS:
                if run.get(key) is not None and key not in skipped:
                    ratios.setdefault(key, []).append(float(run[key]))
            derived = {**to_reference(run), **cpu_bound(run, targets.get(int(run["nodes"])))}
            for key, value in derived.items():
                ratios.setdefault(key, []).append(value)
    return {
        str(nodes): {
            key: summary(values, targets.get(nodes) if key in JUDGED else None)
            for key, values in ratios.items()
        }
        for nodes, ratios in sorted(by_size.items())
    }


def to_reference(run: dict[str, Any]) -> dict[str, float]:
    """Ours over the reference in one repeat: raw, and at equal machine speed (each time
    over its run's probe unit, as `scale.at_equal_speed`)."""
    ours, theirs = run.get("operator"), run.get("reference")
    if not ours or not theirs:
        return {}
    raw, equal = TO_REFERENCE
    out = {raw: round(ours["seconds"] / theirs["seconds"], 2)}
    if ours.get("probe_unit_ms") and theirs.get("probe_unit_ms"):
        out[equal] = round(
            (ours["seconds"] / ours["probe_unit_ms"])
            / (theirs["seconds"] / theirs["probe_unit_ms"]),
            2,
        )
    return out


def cpu_bound(run: dict[str, Any], target: float | None) -> dict[str, float]:
    """What the CPU alone says of one pair, where the machine is the bottleneck.

    On a machine the floor keeps busy, a run's time follows its CPU over the cores (its
    total CPU over the floor's tracks the time ratio to within a few hundredths), so every
    CPU second the operator's run spends beyond the floor's costs time. Two parts of that
    are there in every run of it: the operator's own CPU to ready, and what its label
    writes cost the API server, etcd and every watcher of nodes (the other processes' CPU
    in its label phase; the floor labels before its clock). Their sum over the floor's CPU
    is a ratio the operator's time does not beat on average, whatever the luck of a pair:
    `ratio_cpu_bound`. With a target, the operator's CPU that would meet it (the target's
    share of the floor's CPU, less the label writes' cost), beside what it spent."""
    floor, ours = run.get("floor"), run.get("operator")
    if not floor or not ours:
        return {}
    floor_cpu = sum((floor.get("process_cpu_seconds") or {}).values())
    phase = (ours.get("label_phase") or {}).get("process_cpu_seconds")
    own = ours.get("operator_cpu_seconds_to_ready")
    if not floor_cpu or phase is None or own is None:
        return {}
    labels = sum(v for process, v in phase.items() if process not in NOT_LABEL_WORK)
    out = {CPU_BOUND: round((floor_cpu + own + labels) / floor_cpu, 3)}
    if target is not None:
        out[CPU_BUDGET] = round((target - 1) * floor_cpu - labels, 1)
        out[OWN_CPU] = round(float(own), 2)
    return out


def _target(text: str) -> tuple[int, float]:
    nodes, _, ratio = text.partition("=")
    return int(nodes), float(ratio)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="scale.py result files")
    parser.add_argument(
        "--target",
        action="append",
        type=_target,
        default=[],
        help="NODES=RATIO, the most a ratio at that size may be (issue 14: 100=1.10, 1000=1.05)",
    )
    parser.add_argument("--name", default="pairs", help="bench/results/<name>.json")
    args = parser.parse_args()
    sizes = pooled(args.files, dict(args.target))
    for nodes, ratios in sizes.items():
        for key, s in ratios.items():
            lo, hi = s["mean_interval"]
            mlo, mhi = s["median_interval"]
            print(
                f"[{nodes}] {key}: {s['pairs']} pairs, mean {s['mean']} ({CONFIDENCE}%: "
                f"{lo}-{hi}), median {s['median']} ({mlo}-{mhi})"
                + (f"; target {s['target']}: {s['by_mean']}" if s["target"] is not None else "")
            )
    finish(
        args.name, {"files": [p.name for p in args.files], "confidence": CONFIDENCE, "sizes": sizes}
    )


if __name__ == "__main__":
    main()
