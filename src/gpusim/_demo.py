"""`gpu-operator demo`: the project's main job on one machine.

A simulated GPU cluster (real control plane, kwok nodes, simulated GPUs), our CRDs, a
sample ClusterPolicy and the operator running as its own process, as it would in its pod.
It shows each operand's readiness as it changes until the policy is `ready`, proves a pod
asking for `nvidia.com/gpu: 1` runs on a GPU node, then stays up until Ctrl-C, which tears
everything down. With `--dra`, the same on the DRA stack: a GPUCluster and a claim-based pod
(`gpusim._demo_dra`).

The flags and their help are in `components.commands.demo`, which runs `run_demo` by name:
the product never imports the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from kubernetes_asyncio import client, config

from components.api import DEFAULT_IMAGES, OperandImage, os_tag
from components.commands.demo import REPO_CONFIG
from components.errors import CommandError
from gpusim._cluster import SimulatedCluster
from gpusim._crds import apply_crds, load_documents
from gpusim._demo_dra import drive_dra
from gpusim._demo_follow import say as _say
from gpusim._demo_follow import statuses
from gpusim._errors import SimError
from gpusim._nodes import ClusterConfig, OsRelease, parse_os_list
from reconciler import name_of
from reconciler.envtest import free_port

NAMESPACE = "gpu-operator"
GPU_POD = "gpu-demo"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_demo(args: argparse.Namespace) -> int:
    if args.nodes < 1:
        raise CommandError("--nodes must be at least 1: the demo needs a GPU node")
    try:
        cluster_config = ClusterConfig(
            gpu_nodes=args.nodes, cpu_nodes=args.cpu_nodes, os=parse_os_list(args.os)
        )
    except (SimError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    dra = bool(getattr(args, "dra", False))
    policy = {} if dra else _load_policy(Path(args.policy))
    # The GPUCluster's CRD is there before the operator starts, which serves GPUClusters
    # only where it finds their CRD.
    crds = load_documents(sorted((REPO_CONFIG / "crd").glob("*.yaml"))) if dra else []

    # Ctrl-C stops it even when started with SIGINT ignored (what a shell gives a
    # background job, and so everything a CI job launches from one).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    _say(f"starting a simulated cluster: {args.nodes} GPU nodes, {args.cpu_nodes} CPU-only")
    sim = SimulatedCluster(
        cluster_config, registry=True, crds=crds, progress=lambda line: _say(f"  {line}")
    )
    operator: subprocess.Popen[bytes] | None = None
    try:
        try:
            sim.start()
        except SimError as exc:
            raise CommandError(str(exc)) from exc
        if not dra:
            _serve_driver_images(sim, policy, cluster_config.os)
        log_path = Path(sim.workdir) / "logs" / "gpu-operator.log"
        operator = _start_operator(sim.kubeconfig, log_path)
        _say(f"operator started (pid {operator.pid}); its log: {log_path}")
        if dra:
            asyncio.run(_drive_dra(sim, operator, log_path, args.timeout))
        else:
            asyncio.run(_drive(sim.kubeconfig, policy, operator, log_path, args.timeout))
        _say("")
        _say("the cluster is yours; point kubectl at it with:")
        _say(f"  export KUBECONFIG={sim.kubeconfig}")
        if dra:
            _say("  kubectl get gpucluster,resourceslices,resourceclaims -A; kubectl get pods -A")
        else:
            _say("  kubectl get clusterpolicy; kubectl get pods -A -o wide")
        _say("press Ctrl-C to stop and remove everything")
        while operator.poll() is None:
            time.sleep(1)
        raise CommandError(f"the operator exited with status {operator.returncode}; see {log_path}")
    except KeyboardInterrupt:
        _say("\nstopping ...")
        return 0
    finally:
        if operator is not None and operator.poll() is None:
            operator.terminate()
            try:
                operator.wait(20)
            except subprocess.TimeoutExpired:
                operator.kill()
        sim.stop()


def _serve_driver_images(
    sim: SimulatedCluster, policy: dict[str, Any], releases: Sequence[OsRelease]
) -> None:
    """The demo's driver images live in the simulated cluster's registry: a policy that
    takes NVIDIA's driver image is pointed at it, and the image for each node OS is pushed,
    so the operator's pre-flight check finds what every node will pull."""
    driver = policy.setdefault("spec", {}).setdefault("driver", {})
    if (
        sim.registry is None
        or driver.get("repository") not in (None, "", "nvcr.io/nvidia")
        or driver.get("image") not in (None, "", "driver")
        or driver.get("usePrecompiled") is True
    ):
        return
    version = str(driver.get("version") or DEFAULT_IMAGES[OperandImage.DRIVER].version)
    if version.startswith("sha256:"):
        return
    driver["repository"] = f"{sim.registry.address}/nvidia"
    tags = sorted({os_tag(r.id, r.version_id) for r in releases})
    sim.registry.push_driver_images(version, tags)
    _say(f"driver images {version}-{{{','.join(tags)}}} served by {sim.registry.address}")


def _load_policy(path: Path) -> dict[str, Any]:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise CommandError(f"cannot read the policy {path}: {exc}") from exc
    policies = [d for d in documents if d.get("kind") == "ClusterPolicy"]
    if not policies:
        raise CommandError(f"{path} holds no ClusterPolicy")
    policy: dict[str, Any] = policies[0]
    return policy


def _start_operator(kubeconfig: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """The operator runs as its own process, as it does in its pod."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "components.cli",
                "run",
                f"--kubeconfig={kubeconfig}",
                f"--namespace={NAMESPACE}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )


@contextlib.asynccontextmanager
async def _connected(kubeconfig: Path) -> AsyncIterator[tuple[Any, Any]]:
    """An API client of the simulated cluster and its core API, with the operator's
    namespace there."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        core: Any = client.CoreV1Api(api)
        try:
            await core.create_namespace({"metadata": {"name": NAMESPACE}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
        yield api, core


async def _drive(
    kubeconfig: Path,
    policy: dict[str, Any],
    operator: subprocess.Popen[bytes],
    log_path: Path,
    wait_seconds: float,
) -> None:
    async with _connected(kubeconfig) as (api, core):
        crds = await apply_crds(api, load_documents(sorted((REPO_CONFIG / "crd").glob("*.yaml"))))
        _say(f"installed CRDs: {', '.join(crds)}")
        custom = client.CustomObjectsApi(api)
        name = name_of(policy)
        await custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", policy)
        _say(f"created ClusterPolicy {name}; waiting for it to become ready")
        await _follow_policy(custom, name, operator, log_path, wait_seconds)
        await _run_gpu_pod(core, wait_seconds)


async def _drive_dra(
    sim: SimulatedCluster, operator: subprocess.Popen[bytes], log_path: Path, wait_seconds: float
) -> None:
    async with _connected(sim.kubeconfig) as (api, _):
        await drive_dra(api, list(sim.gpu_nodes), operator, log_path, wait_seconds)


def _progress_lines(status: dict[str, Any]) -> list[str]:
    lines = []
    for component in status.get("components") or []:
        desired = component.get("nodesDesired", 0)
        ready = component.get("nodesReady", 0)
        line = f"  {component.get('name', '?'):<28} {component.get('state', '?'):<9}"
        if desired:
            line += f" {ready}/{desired} nodes ready"
        lines.append(line)
    return lines


async def _follow_policy(
    custom: Any,
    name: str,
    operator: subprocess.Popen[bytes],
    log_path: Path,
    wait_seconds: float,
) -> None:
    shown: dict[str, str] = {}
    status: dict[str, Any] = {}
    resource = ("nvidia.com", "v1", "clusterpolicies", name)
    async for elapsed, status in statuses(custom, resource, operator, log_path, wait_seconds):
        for line in _progress_lines(status):
            key = line.split()[0]
            if shown.get(key) != line:
                shown[key] = line
                _say(f"[{elapsed:5.1f}s]{line}")
        if status.get("state") == "ready":
            _say(f"ClusterPolicy {name} is ready after {elapsed:.1f}s")
            return
    reasons = [
        f"{c.get('type')}={c.get('status')} ({c.get('reason')}: {c.get('message')})"
        for c in status.get("conditions") or []
    ]
    raise CommandError(
        f"ClusterPolicy {name} was not ready within {wait_seconds:.0f}s; conditions: "
        + ("; ".join(reasons) or "none")
        + f"; operator log: {log_path}"
    )


async def _run_gpu_pod(core: Any, wait_seconds: float) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": GPU_POD},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                    "command": ["nvidia-smi"],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ],
        },
    }
    await core.create_namespaced_pod("default", pod)
    _say(f"created pod default/{GPU_POD} with resources.limits nvidia.com/gpu: 1")
    began = time.monotonic()
    while time.monotonic() - began < wait_seconds:
        live = await core.read_namespaced_pod(GPU_POD, "default")
        if live.status.phase in ("Running", "Succeeded"):
            _say(f"pod default/{GPU_POD} is {live.status.phase} on GPU node {live.spec.node_name}")
            return
        await asyncio.sleep(0.5)
    raise CommandError(f"pod default/{GPU_POD} did not start within {wait_seconds:.0f}s")
