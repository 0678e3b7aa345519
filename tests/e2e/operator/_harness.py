"""Helpers for the operator's end-to-end tests: the operator as a process, and the
ClusterPolicy and operand pods as a user reads them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from gpusim import ClusterConfig, SimulatedCluster, parse_kernels, parse_os_list
from reconciler.envtest import free_port
from tests.polling import eventually

REPO = Path(__file__).resolve().parents[3]
NAMESPACE = "gpu-operator"
KERNELS = ("5.15.0-1045-nvidia", "6.8.0-1015-nvidia")
OPERATOR_CLUSTER = ClusterConfig(
    gpu_nodes=3,
    cpu_nodes=1,
    gpus_per_node=4,
    os=parse_os_list("ubuntu22.04,rhel9.4"),
    kernels=parse_kernels(",".join(KERNELS)),
)


POLICY = "cluster-policy"
GROUP, VERSION, PLURAL = "nvidia.com", "v1", "clusterpolicies"
MERGE = {"_content_type": "application/merge-patch+json"}


async def create_policy(kube: Any, spec: dict[str, Any]) -> None:
    await client.CustomObjectsApi(kube).create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": POLICY},
            "spec": spec,
        },
    )


async def policy(kube: Any) -> dict[str, Any]:
    custom = client.CustomObjectsApi(kube)
    obj: dict[str, Any] = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, POLICY)
    return obj


async def patch_policy(kube: Any, spec: dict[str, Any]) -> None:
    custom = client.CustomObjectsApi(kube)
    await custom.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, POLICY, {"spec": spec}, **MERGE
    )


async def wait_ready(kube: Any, seconds: float = 240.0) -> dict[str, Any]:
    """The policy's status once it is `ready` for its current generation. A policy that
    never gets there fails the test with what its status said last (state, generation,
    the operands not ready and on which nodes), not just that it was not ready."""
    last: dict[str, Any] = {}

    async def ready() -> dict[str, Any] | None:
        obj = await policy(kube)
        status = obj.get("status") or {}
        last.update(status=status, generation=obj["metadata"]["generation"])
        fresh = (
            status.get("observedGeneration", obj["metadata"]["generation"])
            >= obj["metadata"]["generation"]
        )
        return status if status.get("state") == "ready" and fresh else None

    try:
        return await eventually(ready, "ClusterPolicy ready", seconds=seconds)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its status said last: {describe_status(last)}") from None


def describe_status(seen: dict[str, Any]) -> str:
    status = seen.get("status") or {}
    not_ready = [
        f"{c.get('name')} {c.get('state')} on {c.get('notReadyNodes') or []}"
        f" ({c.get('nodesReady')}/{c.get('nodesDesired')} nodes) {c.get('message') or ''}"
        for c in status.get("components") or ()
        if c.get("state") not in ("ready", "disabled")
    ]
    return (
        f"state {status.get('state')!r} for generation {status.get('observedGeneration')}"
        f" of {seen.get('generation')}; not ready: {'; '.join(not_ready) or 'none'}"
    )


async def wait_counted(kube: Any, counts: dict[str, int], seconds: float = 240.0) -> dict[str, Any]:
    """Waits until the policy is ready and counts `counts[component]` nodes ready (and as
    many desired) for each named component; returns the components by name.

    The policy's counts follow the DaemonSets' own status, which the DaemonSet controller
    writes a moment after the pods run: a `ready` read once may predate it."""

    async def counted() -> dict[str, Any] | None:
        status = await wait_ready(kube, seconds)
        states = {c["name"]: c for c in status["components"]}
        wanted = all(
            (states[name]["nodesReady"], states[name]["nodesDesired"]) == (count, count)
            for name, count in counts.items()
        )
        return states if wanted else None

    return await eventually(counted, f"the policy counting nodes ready: {counts}", seconds=seconds)


async def operand_pods(kube: Any) -> list[Any]:
    pods = await client.CoreV1Api(kube).list_namespaced_pod(NAMESPACE)
    return list(pods.items)


async def daemonsets(kube: Any) -> list[Any]:
    sets = await client.AppsV1Api(kube).list_namespaced_daemon_set(NAMESPACE)
    return list(sets.items)


def running(pod: Any) -> bool:
    return bool(pod.status.phase == "Running" and pod.spec.node_name)


class OperatorProcess:
    """`gpu-operator run` against the simulated cluster; killable and restartable.

    `extra_args` are added to its command line (`--leader-elect`, say); `env` replaces this
    process's environment."""

    def __init__(
        self,
        kubeconfig: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.extra_args = tuple(extra_args)
        self.env = None if env is None else dict(env)
        self.popen: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.probe_port = 0
        self.metrics_port = 0

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.probe_port = free_port()
        self.metrics_port = free_port()
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "components.cli",
                    "run",
                    f"--kubeconfig={self.kubeconfig}",
                    f"--namespace={NAMESPACE}",
                    f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                    f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
                    *self.extra_args,
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(os.environ if self.env is None else self.env, PYTHONUNBUFFERED="1"),
            )
        self.starts += 1

    def kill(self) -> None:
        """kill -9: no graceful shutdown, whatever was in flight is lost."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def pause(self) -> None:
        """SIGSTOP: the process stays, but runs nothing until `resume()` (a frozen VM)."""
        if self.popen is not None:
            self.popen.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.popen is not None:
            self.popen.send_signal(signal.SIGCONT)

    def probe(self, path: str) -> int:
        """The HTTP status of the health probe server's `path` (0: nothing answered)."""
        url = f"http://127.0.0.1:{self.probe_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def lease_identities(self) -> list[str]:
        """The identities this process's runs held the lease as (from its log, oldest first)."""
        if not self.log_path.exists():
            return []
        return re.findall(r"acquired by (\S+)", self.log_path.read_text(errors="replace"))

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def attach_logs(
    report: Any,
    operators: Sequence[Any] = (),
    sim: Any = None,
    *,
    keep_as: str = "",
    lines: int = 80,
) -> None:
    """On a failed test's report: each operator process's log tail (and, with `keep_as`,
    the whole log copied to `.test-logs/<keep_as>-<log name>`), then each simulated
    component's. Anything not an `OperatorProcess` / `SimulatedCluster` is skipped, so a
    hook can pass the fixtures it looked up whatever they hold."""
    for process in operators:
        if not isinstance(process, OperatorProcess):
            continue
        name = process.log_path.name
        report.sections.append((f"{name} (tail)", process.log_tail(lines)))
        if keep_as and process.log_path.exists():
            keep = REPO / ".test-logs" / f"{keep_as}-{name}"
            keep.parent.mkdir(exist_ok=True)
            keep.write_bytes(process.log_path.read_bytes())
    if isinstance(sim, SimulatedCluster):
        for component, tail in sim.log_tails(20).items():
            report.sections.append((f"{component} log (tail)", tail))
