"""NVIDIA's operator beside a simulated cluster (`gpusim._nvidia_operator`, shared by
`bench/scale.py --reference` and the fidelity tests). What it must get right without a
cluster: the policy the reference can take, the process it starts (its manifests shown at
the path compiled into it, its pid the one whose CPU is counted), and telling a machine that
cannot build it from a build that broke."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gpusim import (
    ReferenceUnavailable,
    build_reference,
    reference_command,
    reference_env,
    reference_policy,
)
from gpusim._errors import SimError
from tests.tools import REPO

SAMPLE_POLICY = REPO / "config" / "samples" / "nvidia_v1_clusterpolicy_full.yaml"


def test_the_reference_gets_the_sample_policy_less_the_driver_probes_it_cannot_set() -> None:
    policy = yaml.safe_load(SAMPLE_POLICY.read_text())
    given = reference_policy(policy)
    driver = given["spec"]["driver"]
    assert "livenessProbe" not in driver and "readinessProbe" not in driver
    assert driver["startupProbe"] == policy["spec"]["driver"]["startupProbe"]
    assert given["spec"]["devicePlugin"] == policy["spec"]["devicePlugin"]
    assert given["metadata"] == policy["metadata"]
    # Ours still gets the whole sample.
    assert "livenessProbe" in policy["spec"]["driver"]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="util-linux's unshare is missing")
def test_the_reference_reads_its_manifests_from_opt_and_keeps_its_pid(tmp_path: Path) -> None:
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
    command = reference_command(folder, 18080, 18081)
    env = reference_env(tmp_path / "kubeconfig", "gpu-operator")
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


def test_the_images_given_replace_the_simulated_ones() -> None:
    env = reference_env(Path("k"), "ns", {"DRIVER_IMAGE": "nvcr.io/nvidia/driver:595.91.07"})
    assert env["DRIVER_IMAGE"] == "nvcr.io/nvidia/driver:595.91.07"
    assert "VALIDATOR_IMAGE" not in env or not env["VALIDATOR_IMAGE"].startswith(
        "nvcr.io/nvidia/sim"
    )


def _script(tmp_path: Path, said: str, status: int = 1) -> Path:
    script = tmp_path / "build-reference.sh"
    script.write_text(f'echo "build-reference: {said}" >&2\nexit {status}\n')
    return script


@pytest.mark.parametrize(
    "said",
    [
        "Go is not installed; install Go 1.26 or newer (https://go.dev/dl/) and run this "
        "script again.",
        "could not download the Go modules for nvidia-gpu-operator v0; check that the Go "
        "module proxy (https://proxy.golang.org,direct) is reachable, then run this script "
        "again.",
    ],
    ids=["no-go", "no-proxy"],
)
def test_a_machine_that_cannot_build_it_says_why(tmp_path: Path, said: str) -> None:
    with pytest.raises(ReferenceUnavailable) as caught:
        build_reference(_script(tmp_path, said))
    assert str(caught.value) == f"NVIDIA's GPU Operator could not be built: {said}"


def test_a_build_that_broke_is_an_error_not_a_reason_to_skip(tmp_path: Path) -> None:
    said = "building nvidia-gpu-operator v0 failed (log above); fix the error"
    with pytest.raises(SimError) as caught:
        build_reference(_script(tmp_path, said))
    assert not isinstance(caught.value, ReferenceUnavailable)
    assert said in str(caught.value)


def test_the_built_folder_is_the_scripts_last_line(tmp_path: Path) -> None:
    script = tmp_path / "build-reference.sh"
    script.write_text(f"echo cached >&2\necho other\necho {tmp_path / 'out'}\n")
    assert build_reference(script) == tmp_path / "out"
