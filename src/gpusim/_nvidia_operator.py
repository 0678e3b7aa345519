"""NVIDIA's GPU Operator itself, the reference ours is measured against, run as a process
beside a simulated cluster: by the scale benchmark (`bench/scale.py --reference`) and the
fidelity tests (`tests/e2e/fidelity/`), never by the product.

`hack/build-reference.sh` builds it from its Go module (pinned by `hack/go/reference`,
cached like the control plane) and keeps its manifests beside the binary. It reads them
from /opt/gpu-operator, a path compiled in: `reference_command` shows it the cached copy
there through a private mount namespace and leaves the machine's /opt alone.

    folder = build_reference()            # ReferenceUnavailable: why it cannot be built
    process = start_reference(sim, folder, metrics_port=free_port(), namespace="gpu-operator")
    ...
    stop_reference(process)
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpusim._cluster import SimulatedCluster
from gpusim._errors import SimError
from reconciler.envtest import free_port

REFERENCE_BUILD = Path(__file__).resolve().parents[2] / "hack" / "build-reference.sh"
"""In a source checkout only: the simulator, like the reference, is never in the image."""

IMAGE_ENVS = (
    "CC_MANAGER_IMAGE",
    "CONTAINER_TOOLKIT_IMAGE",
    "CUDA_BASE_IMAGE",
    "DCGM_EXPORTER_IMAGE",
    "DCGM_IMAGE",
    "DEVICE_PLUGIN_IMAGE",
    "DRIVER_IMAGE",
    "DRIVER_MANAGER_IMAGE",
    "GDRCOPY_IMAGE",
    "GDS_IMAGE",
    "GFD_IMAGE",
    "KATA_MANAGER_IMAGE",
    "MIG_MANAGER_IMAGE",
    "SANDBOX_DEVICE_PLUGIN_IMAGE",
    "VALIDATOR_IMAGE",
    "VFIO_MANAGER_IMAGE",
    "VGPU_DEVICE_MANAGER_IMAGE",
    "VGPU_MANAGER_IMAGE",
)
"""The reference takes an operand's image from these when the policy names none (its Helm
chart fills the policy instead; the reference's sample names none). Ours reads the same."""

UNSET_PROBES = ("livenessProbe", "readinessProbe")
"""Driver probes the reference cannot set: its driver container's manifest has only a
startup probe, and it sets a probe's fields on the manifest's own (absent) probe, so these
two in a policy make every reconcile panic (its Helm values set only `startupProbe`)."""

_UNAVAILABLE = ("Go is not installed", "could not download the Go modules")
"""What `hack/build-reference.sh` says when this machine cannot build it at all (as opposed
to a build that broke)."""


class ReferenceUnavailable(SimError):
    """NVIDIA's operator cannot be built on this machine (no Go, or no module proxy); the
    message says which."""


def sim_images() -> dict[str, str]:
    """An image name per `IMAGE_ENVS`: on simulated nodes an image is only a name."""
    return {name: f"nvcr.io/nvidia/sim/{name.lower()}:v1" for name in IMAGE_ENVS}


def build_reference(script: Path = REFERENCE_BUILD) -> Path:
    """The folder `hack/build-reference.sh` builds NVIDIA's operator into (cached: a second
    call takes about a second). Raises `ReferenceUnavailable` where Go or the module proxy
    is missing, `SimError` where the build itself failed."""
    if not script.is_file():
        raise ReferenceUnavailable(f"{script} is missing: run from a source checkout")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        reason = said[0].removeprefix("build-reference: ")
        error = ReferenceUnavailable if reason.startswith(_UNAVAILABLE) else SimError
        raise error(f"NVIDIA's GPU Operator could not be built: {reason}")
    return Path(done.stdout.strip().splitlines()[-1])


def reference_policy(policy: Mapping[str, Any]) -> dict[str, Any]:
    """`policy` as the reference can take it: without `UNSET_PROBES`."""
    spec = dict(policy.get("spec") or {})
    spec["driver"] = {k: v for k, v in (spec.get("driver") or {}).items() if k not in UNSET_PROBES}
    return {**policy, "spec": spec}


def reference_command(folder: Path, metrics_port: int, probe_port: int) -> list[str]:
    """The reference's process, reading its manifests where it looks for them.

    It reads them from /opt/gpu-operator, a path compiled in; a private mount namespace (a
    user namespace makes it need no privilege) shows it `folder/opt-gpu-operator` there and
    leaves the machine's /opt alone. `unshare` and `sh` exec in place: the process's pid
    is the reference's, for its CPU and memory."""
    mounts = (
        "mount -t tmpfs none /opt && mkdir /opt/gpu-operator && "
        'mount --bind "$0" /opt/gpu-operator && exec "$1" "$2" "$3"'
    )
    return [
        "unshare",
        "--user",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        mounts,
        str(folder / "opt-gpu-operator"),
        str(folder / "gpu-operator"),
        f"--metrics-bind-address=127.0.0.1:{metrics_port}",
        f"--health-probe-bind-address=127.0.0.1:{probe_port}",
    ]


def reference_env(
    kubeconfig: Path, namespace: str, images: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The reference's environment: its cluster, its namespace and `images` (by
    `IMAGE_ENVS` name; `sim_images()` when not given)."""
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "OPERATOR_NAMESPACE": namespace,
        # Else it reads its own host's /host-etc/os-release (its pod's mount) to tell
        # OpenShift, and fails every DaemonSet without it; set, it takes the host as not
        # OpenShift, which is what this machine is.
        "UNIT_TEST": "true",
        **(sim_images() if images is None else images),
    }


def start_reference(
    sim: SimulatedCluster,
    folder: Path,
    *,
    namespace: str,
    metrics_port: int = 0,
    images: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """NVIDIA's operator (from `build_reference`'s folder) on `sim`, logging to the
    cluster's `logs/nvidia-gpu-operator.log`. The namespace must exist."""
    command = reference_command(folder, metrics_port or free_port(), free_port())
    env = reference_env(sim.kubeconfig, namespace, images)
    with (sim.workdir / "logs" / "nvidia-gpu-operator.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def stop_reference(process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """SIGTERM, and wait for it to exit (kill after `timeout` seconds)."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
