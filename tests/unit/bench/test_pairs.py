"""`bench/pairs.py` says a scale target is met only when the pooled pairs are sure of it: a
median that happens to sit under the target, with pairs on both sides, is "cannot tell"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.tools import REPO

PAIRS = REPO / "bench" / "pairs.py"


def _results(path: Path, nodes: int, ratios: list[float], **more: list[float]) -> Path:
    runs = [{"nodes": nodes, "ratio": r} for r in ratios]
    for key, values in more.items():
        for run, value in zip(runs, values, strict=True):
            run[key] = value
    path.write_text(json.dumps({"benchmark": f"scale-{nodes}", "runs": runs}))
    return path


def _pooled(tmp_path: Path, *files: Path, targets: tuple[str, ...]) -> dict[str, dict]:
    flags = [arg for t in targets for arg in ("--target", t)]
    name = str(tmp_path / "pairs")
    out = subprocess.run(
        [sys.executable, str(PAIRS), *map(str, files), *flags, "--name", name],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert json.loads((tmp_path / "pairs.json").read_text()) == figures
    return figures["sizes"]


def test_pairs_of_several_files_pool_into_one_verdict_per_size(tmp_path: Path) -> None:
    first = _results(tmp_path / "a.json", 1000, [1.07, 1.08, 1.08])
    second = _results(tmp_path / "b.json", 1000, [1.10, 1.07])
    sizes = _pooled(tmp_path, first, second, targets=("1000=1.05",))
    ratio = sizes["1000"]["ratio"]
    assert ratio["pairs"] == 5
    assert ratio["median"] == 1.08
    assert ratio["by_mean"] == "missed"
    low, high = ratio["mean_interval"]
    assert 1.05 < low <= ratio["mean"] <= high


def test_a_median_under_the_target_with_pairs_on_both_sides_cannot_tell(
    tmp_path: Path,
) -> None:
    spread = _results(tmp_path / "a.json", 100, [0.96, 1.04, 1.06, 1.16, 1.18])
    tight = _results(tmp_path / "b.json", 300, [1.01, 1.02, 1.02, 1.03])
    sizes = _pooled(tmp_path, spread, tight, targets=("100=1.10", "300=1.10"))
    assert sizes["100"]["ratio"]["median"] < 1.10
    assert sizes["100"]["ratio"]["by_mean"] == "cannot tell"
    assert sizes["300"]["ratio"]["by_mean"] == "met"


def test_the_labelled_floors_own_ratio_is_not_judged_against_the_target(tmp_path: Path) -> None:
    runs = _results(
        tmp_path / "a.json",
        1000,
        [1.08, 1.07],
        labelled_floor_ratio=[1.04, 1.00],
        ratio_to_labelled_floor=[1.04, 1.07],
    )
    sizes = _pooled(tmp_path, runs, targets=("1000=1.05",))
    assert sizes["1000"]["labelled_floor_ratio"]["by_mean"] == ""
    assert sizes["1000"]["ratio_to_labelled_floor"]["target"] == 1.05


def test_a_labelled_floor_with_a_process_alongside_is_not_pooled_as_the_labelled_floor(
    tmp_path: Path,
) -> None:
    plain = _results(
        tmp_path / "plain.json", 1000, [1.10, 1.12], ratio_to_labelled_floor=[1.06, 1.08]
    )
    burning = tmp_path / "burning.json"
    runs = [
        {
            "nodes": 1000,
            "ratio": 1.14,
            "ratio_to_labelled_floor": 1.01,
            "labelled_floor_ratio": 1.13,
            "labelled_floor": {"seconds": 140.0, "burn_share": 0.085},
        }
    ]
    burning.write_text(json.dumps({"benchmark": "scale-1000", "runs": runs}))
    sizes = _pooled(tmp_path, plain, burning, targets=("1000=1.05",))
    assert sizes["1000"]["ratio"]["each"] == [1.10, 1.12, 1.14]
    assert sizes["1000"]["ratio_to_labelled_floor"]["each"] == [1.06, 1.08]
    assert "labelled_floor_ratio" not in sizes["1000"]


def test_runs_with_nvidias_operator_pool_its_ratio_and_ours_over_it(tmp_path: Path) -> None:
    """The reference is judged against the same target, and ours over it comes from the two
    runs of each repeat (raw, and at equal machine speed from each run's probe)."""
    with_reference = tmp_path / "reference.json"
    runs = [
        {
            "nodes": 1000,
            "ratio": 1.10,
            "reference_ratio": 1.20,
            "operator": {"seconds": 110.0, "probe_unit_ms": 1.1},
            "reference": {"seconds": 120.0, "probe_unit_ms": 1.2},
        },
        {
            "nodes": 1000,
            "ratio": 1.08,
            "reference_ratio": 1.16,
            "operator": {"seconds": 108.0},
            "reference": {"seconds": 116.0, "probe_unit_ms": 1.2},
        },
    ]
    with_reference.write_text(json.dumps({"benchmark": "scale-1000", "runs": runs}))
    without = _results(tmp_path / "ours.json", 1000, [1.12])
    sizes = _pooled(tmp_path, with_reference, without, targets=("1000=1.05",))
    assert sizes["1000"]["ratio"]["pairs"] == 3
    assert sizes["1000"]["reference_ratio"]["each"] == [1.20, 1.16]
    assert sizes["1000"]["reference_ratio"]["by_mean"] == "missed"
    assert sizes["1000"]["ratio_to_reference"]["each"] == [0.92, 0.93]
    # The second repeat has no probe for ours: only the first is at equal speed.
    assert sizes["1000"]["ratio_to_reference_at_equal_speed"]["each"] == [1.0]
    assert sizes["1000"]["ratio_to_reference"]["target"] is None


def _cpu_run(floor_cpu: float, own: float, label_phase: dict[str, float]) -> dict:
    return {
        "nodes": 1000,
        "ratio": 1.08,
        "floor": {"seconds": 125.0, "process_cpu_seconds": {"kube-apiserver": floor_cpu}},
        "operator": {
            "seconds": 135.0,
            "operator_cpu_seconds_to_ready": own,
            "label_phase": {"process_cpu_seconds": label_phase},
        },
    }


def test_the_cpu_bound_says_a_target_cannot_be_met_without_less_operator_cpu(
    tmp_path: Path,
) -> None:
    """On a machine the floor keeps busy, the operator's own CPU and what its label writes
    cost the other processes add to the floor's CPU in every run: a target under that sum
    is missed however lucky the pairs, and the budget says how much CPU would meet it."""
    labels = {"kube-apiserver": 3.6, "etcd": 0.4, "kwok": 1.0, "operator": 1.0, "bench": 0.2}
    runs = [_cpu_run(250.0, 10.0, labels), _cpu_run(240.0, 9.8, labels)]
    runs.append({"nodes": 1000, "ratio": 1.02})  # an old run without the figures
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"benchmark": "scale-1000", "runs": runs}))
    sizes = _pooled(tmp_path, path, targets=("1000=1.05",))
    bound = sizes["1000"]["ratio_cpu_bound"]
    # (250 + 10 + 5) / 250 and (240 + 9.8 + 5) / 240: the operator's and bench's label-phase
    # CPU is not the label writes' cost.
    assert bound["each"] == [1.06, 1.062]
    assert bound["by_mean"] == "missed"
    assert sizes["1000"]["ratio"]["pairs"] == 3
    # At 1.05 the floor's 250 s allow 12.5 s beyond it; the label writes take 5 of them.
    assert sizes["1000"]["operator_cpu_budget_seconds"]["each"] == [7.5, 7.0]
    assert sizes["1000"]["operator_cpu_budget_seconds"]["target"] is None
    assert sizes["1000"]["operator_cpu_seconds"]["each"] == [10.0, 9.8]
