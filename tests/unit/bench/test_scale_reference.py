"""`bench/scale.py --reference` runs NVIDIA's operator beside ours (started by
`gpusim._nvidia_operator`, tested in tests/unit/sim/). What the benchmark itself must get
right without a cluster: when a run with DaemonSets that want no pod is rolled out, and a
refusal of a cluster it cannot serve."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from types import ModuleType

import pytest

from tests.tools import REPO


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("scale")


def _daemonset(desired: int | None, observed: int, **status: int) -> dict[str, object]:
    counts = {} if desired is None else {"desiredNumberScheduled": desired, **status}
    return {"metadata": {"generation": 1}, "status": {"observedGeneration": observed, **counts}}


def test_a_daemonset_with_no_pod_to_run_is_rolled_out_only_for_the_reference(
    scale: ModuleType,
) -> None:
    podless = _daemonset(0, 1, numberReady=0)
    assert scale._rolled_out(podless, podless=True)
    assert not scale._rolled_out(podless)
    # Not yet seen by its controller: not rolled out either way.
    assert not scale._rolled_out(_daemonset(None, 0), podless=True)
    assert not scale._rolled_out(_daemonset(0, 0), podless=True)
    half = _daemonset(4, 1, numberReady=2, updatedNumberScheduled=4, numberAvailable=2)
    assert not scale._rolled_out(half, podless=True)
    whole = _daemonset(4, 1, numberReady=4, updatedNumberScheduled=4, numberAvailable=4)
    assert scale._rolled_out(whole) and scale._rolled_out(whole, podless=True)


def test_a_reference_run_on_a_mixed_os_cluster_is_refused_with_the_fix() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scale.py"), "--reference", "--nodes", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert done.returncode == 2
    assert "--reference needs the GPU nodes on one OS" in done.stderr
    assert "--os ubuntu22.04" in done.stderr
