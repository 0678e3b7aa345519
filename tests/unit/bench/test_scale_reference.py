"""`bench/scale.py --reference` runs NVIDIA's operator beside ours. What it must get right
without a cluster: the policy the reference can take, the process it starts (its manifests
shown at the path compiled into it, its pid the one whose CPU is counted), when a run with
DaemonSets that want no pod is rolled out, and a refusal of a cluster it cannot serve."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.tools import REPO


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("scale")


def test_the_reference_gets_the_sample_policy_less_the_driver_probes_it_cannot_set(
    scale: ModuleType,
) -> None:
    policy = yaml.safe_load(scale.SAMPLE_POLICY.read_text())
    given = scale.reference_policy(policy)
    driver = given["spec"]["driver"]
    assert "livenessProbe" not in driver and "readinessProbe" not in driver
    assert driver["startupProbe"] == policy["spec"]["driver"]["startupProbe"]
    assert given["spec"]["devicePlugin"] == policy["spec"]["devicePlugin"]
    assert given["metadata"] == policy["metadata"]
    # Ours still gets the whole sample.
    assert "livenessProbe" in policy["spec"]["driver"]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare is missing")
def test_the_reference_reads_its_manifests_from_opt_and_keeps_its_pid(
    scale: ModuleType, tmp_path: Path
) -> None:
    """A stand-in binary reports what it sees: /opt/gpu-operator is the build's manifest
    folder, its arguments are the reference's flags, and it runs as the started pid."""
    folder = tmp_path / "build"
    (folder / "opt-gpu-operator" / "state-driver").mkdir(parents=True)
    (folder / "opt-gpu-operator" / "state-driver" / "0500_daemonset.yaml").write_text("kind: x\n")
    stand_in = folder / "gpu-operator"
    stand_in.write_text(
        "#!/bin/sh\n"
        'echo "pid $$"\n'
        "cat /opt/gpu-operator/state-driver/0500_daemonset.yaml\n"
        'echo "args $*"\n'
        'echo "env $OPERATOR_NAMESPACE $UNIT_TEST $VALIDATOR_IMAGE"\n'
    )
    stand_in.chmod(0o755)
    command = scale.reference_command(folder, 18080, 18081)
    env = scale.reference_env(tmp_path / "kubeconfig")
    machine = machine_opt()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0, out
    lines = out.splitlines()
    assert lines[0] == f"pid {process.pid}"
    assert lines[1] == "kind: x"
    assert lines[2] == (
        "args --metrics-bind-address=127.0.0.1:18080 --health-probe-bind-address=127.0.0.1:18081"
    )
    assert lines[3].startswith("env gpu-operator true nvcr.io/")
    # The machine's own /opt is left as it was, whatever it holds (a machine with the
    # reference operator installed has its manifests there).
    assert machine_opt() == machine
    assert env["KUBECONFIG"] == str(tmp_path / "kubeconfig")


def machine_opt() -> dict[str, object]:
    """What a run could change of the machine's /opt: the file system mounted there, its
    entries, and every file under /opt/gpu-operator (if there is one) with its mtime and
    content."""
    opt = Path("/opt")
    seen: dict[str, object] = {"/opt": _identity(opt)}
    if opt.is_dir():
        seen["/opt entries"] = sorted(p.name for p in opt.iterdir())
    reference = opt / "gpu-operator"
    for path in [reference, *(sorted(reference.rglob("*")) if reference.is_dir() else ())]:
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        seen[str(path)] = (_identity(path), content)
    return seen


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


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
