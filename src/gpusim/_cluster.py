"""The simulated cluster: a real control plane whose nodes are kwok's and whose GPUs are ours.

`SimulatedCluster` starts etcd + kube-apiserver (reconciler.envtest), then the rest of the
cluster (`gpusim._components`: kube-controller-manager, kube-scheduler, kwok and the GPU
node behaviour), creates the nodes and returns once every node is Ready and schedulable.
Everything stops together; with `die_with_parent=False` the processes outlive Python (that is
how `gpu-operator sim up` leaves a cluster running).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar

import yaml

from gpusim._admission import gate_pod_ready
from gpusim._binaries import SimBinaries
from gpusim._components import Components
from gpusim._errors import SimError
from gpusim._failing_drivers import marker_patch
from gpusim._nodes import (
    ANNOTATION_INDEX,
    ClusterConfig,
    NodeSpec,
    kernel_labels,
    node_manifest,
)
from gpusim._registry import SimulatedRegistry
from reconciler import annotations_of, name_of
from reconciler.envtest import ControlPlane, ControlPlaneError, Lifecycle, Process

_T = TypeVar("_T")

_NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_CREATE_CONCURRENCY = 32
OWN_STAGES = Path(__file__).resolve().parent / "stages"
"""kwok stages of ours, beside kwok's standard ones (what a kubelet does that kwok's don't)."""
KWOK_CONFIGURATION = Path(__file__).resolve().parent / "kwok-configuration.yaml"
"""kwok's options that have no flag (read like the stages, from a `--config` file)."""


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _ok(response: Any) -> dict[str, Any]:
    try:
        body: bytes = await response.read()
    finally:
        response.release()
    if not 200 <= response.status < 300:
        try:
            message = json.loads(body).get("message", "")
        except ValueError:
            message = body[:200].decode(errors="replace")
        raise SimError(f"the apiserver answered {response.status}: {message}")
    result: dict[str, Any] = json.loads(body)
    return result


class SimulatedCluster(Lifecycle):
    """A full simulated GPU cluster; use as a context manager or call `start()`/`stop()`.

    `config` says which nodes to create. `workdir` keeps the cluster's files (required with
    `die_with_parent=False`); without it a temporary folder is used and removed at `stop()`.
    `apiserver_port` fixes the apiserver's port (0 = any free one). `extra_apiserver_args`
    adds or overrides kube-apiserver flags (an audit log, say). `crds` are installed before
    kube-controller-manager starts: a cluster where the operator's CRDs were there before
    (its garbage collector learns custom kinds by discovery every 30 s; an object owned by
    a kind created after it started is retried, with a GET each time, until then).
    `progress` receives one line per start-up step. `registry` starts an OCI registry on
    loopback (`self.registry`, `gpusim._registry`) for the operator's image pre-flight.
    """

    def __init__(
        self,
        config: ClusterConfig | None = None,
        *,
        workdir: Path | None = None,
        binaries: SimBinaries | None = None,
        die_with_parent: bool = True,
        apiserver_port: int = 0,
        extra_apiserver_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        crds: Sequence[dict[str, Any]] = (),
        progress: Callable[[str], None] | None = None,
        on_process: Callable[[str, int], None] | None = None,
        registry: bool = False,
    ) -> None:
        self.config = config or ClusterConfig()
        self._crds = tuple(crds)
        self.binaries = binaries or SimBinaries.from_cache()
        self._workdir = workdir
        self._die_with_parent = die_with_parent
        self._apiserver_port = apiserver_port
        self._extra_apiserver_args = tuple(extra_apiserver_args)
        self._startup_timeout = startup_timeout
        self._progress = progress or (lambda line: None)
        self._on_process = on_process or (lambda name, pid: None)
        self.control_plane: ControlPlane | None = None
        self.processes: dict[str, Process] = {}
        self.nodes: list[NodeSpec] = []
        self._components: Components | None = None
        self._want_registry = registry
        self.registry: SimulatedRegistry | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        if self.control_plane is None:
            raise SimError("the simulated cluster is not started")
        return self.control_plane.kubeconfig

    @property
    def workdir(self) -> Path:
        if self.control_plane is None:
            raise SimError("the simulated cluster is not started")
        return self.control_plane.workdir

    @property
    def gpu_nodes(self) -> list[str]:
        return [spec.name for spec in self.nodes if spec.gpus]

    @property
    def cpu_nodes(self) -> list[str]:
        return [spec.name for spec in self.nodes if not spec.gpus]

    def start(self) -> Self:
        """Start every component, create the nodes, and wait until they are Ready."""
        began = time.monotonic()
        specs = self.config.node_specs()
        if self._apiserver_port:
            _check_port_free(self._apiserver_port)
        self.binaries.require(
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"
        )
        stages = sorted(self.binaries.kwok_stages.glob("*.yaml"))
        if not stages:
            raise SimError(
                f"kwok's stage configs are missing in {self.binaries.kwok_stages}; "
                "run `bash hack/build-binaries.sh` to install them"
            )
        own = [*sorted(OWN_STAGES.glob("*.yaml")), KWOK_CONFIGURATION]
        if self._workdir is None and not self._die_with_parent:
            raise SimError("a cluster that outlives this process needs a workdir")
        return self._started(began, lambda: self._start_all(specs, stages, own))

    def _start_all(self, specs: list[NodeSpec], stages: list[Path], own: list[Path]) -> None:
        try:
            self._progress("starting etcd and kube-apiserver")
            self.control_plane = ControlPlane(
                workdir=self._workdir,
                binaries=self.binaries,
                die_with_parent=self._die_with_parent,
                apiserver_port=self._apiserver_port,
                extra_apiserver_args=self._extra_apiserver_args,
                startup_timeout=self._startup_timeout,
            ).start()
            plane = self.control_plane
            for name, process in (("etcd", plane.etcd), ("kube-apiserver", plane.apiserver)):
                if process is not None and process.pid is not None:
                    self._on_process(name, process.pid)
            if self._crds:
                self._progress(f"installing {len(self._crds)} CRDs")
                _run(self._install_crds())
            self._progress(
                "starting kube-controller-manager, kube-scheduler, kwok and the GPU node behaviour"
            )
            self._components = Components(
                plane,
                self.binaries,
                mig_reconfigure_seconds=self.config.mig_reconfigure_seconds,
                die_with_parent=self._die_with_parent,
                startup_timeout=self._startup_timeout,
                on_process=self._on_process,
            )
            self.processes = self._components.processes
            if self._want_registry:
                self._progress("starting the image registry")
                self.registry = SimulatedRegistry(
                    self.binaries.registry,
                    plane.logs_dir / "registry.log",
                    die_with_parent=self._die_with_parent,
                ).start()
                if self.registry.process.pid is not None:
                    self._on_process("registry", self.registry.process.pid)
            gated = _gate_pod_ready(stages, plane.workdir / "kwok-stages")
            self._components.start([*gated, *own])
            self._progress(
                f"creating {self.config.gpu_nodes} GPU nodes "
                f"({self.config.gpus_per_node} x {self.config.product}) and "
                f"{self.config.cpu_nodes} CPU-only nodes"
            )
            _run(self._add_nodes(specs, first_index=0))
        except ControlPlaneError as exc:
            raise SimError(str(exc)) from exc

    def stop(self) -> None:
        """Stop every process (behaviour, kwok, scheduler, controllers, apiserver, etcd)."""
        if self._components is not None:
            self._components.stop()
        if self.registry is not None:
            self.registry.stop()
        if self.control_plane is not None:
            self.control_plane.stop()

    def pids(self) -> dict[str, int]:
        """Each running process's pid (control plane included), in start order."""
        found: dict[str, int] = {}
        plane = self.control_plane
        if plane is not None:
            for name, process in (("etcd", plane.etcd), ("kube-apiserver", plane.apiserver)):
                if process is not None and process.pid is not None:
                    found[name] = process.pid
        for name, process in self.processes.items():
            if process.pid is not None:
                found[name] = process.pid
        return found

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        return self.control_plane.log_tails(lines) if self.control_plane else {}

    # -- components --------------------------------------------------------------------

    async def _install_crds(self) -> None:
        from gpusim._crds import apply_crds

        async with self.api_client() as api:
            await apply_crds(api, self._crds)

    # -- nodes -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def api_client(self) -> AsyncIterator[Any]:
        """A kubernetes_asyncio ApiClient for this cluster, as the admin user."""
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        configuration.connection_pool_maxsize = _CREATE_CONCURRENCY
        async with client.ApiClient(configuration) as api:
            yield api

    def gpu_node_spec(self, name: str, **fields: Any) -> NodeSpec:
        """A GPU node like the ones this cluster was built with; `fields` override."""
        from gpusim._nodes import gpu_node

        base: dict[str, Any] = {
            "gpus": self.config.gpus_per_node,
            "product": self.config.product,
            "os": self.config.os[0],
            "mig_capable": self.config.mig_capable,
            "container_runtime": self.config.container_runtime,
        }
        if self.config.kernels and "kernel" not in fields and "os" not in fields:
            base["kernel"] = self.config.kernels[0]
        base.update(fields)
        return gpu_node(name, **base)

    async def add_node(self, spec: NodeSpec, *, wait_ready: bool = True) -> None:
        """Create one more node (it joins like a kubelet registering) and wait until Ready."""
        await self.add_nodes([spec], wait_ready=wait_ready)

    async def add_nodes(self, specs: Sequence[NodeSpec], *, wait_ready: bool = True) -> None:
        for spec in specs:
            spec.validate()
        async with self.api_client() as api:
            from kubernetes_asyncio import client

            core: Any = client.CoreV1Api(api)
            listed = await _ok(await core.list_node(_preload_content=False))
            used = [
                int(annotations_of(item).get(ANNOTATION_INDEX, "-1"))
                for item in listed.get("items") or []
            ]
        await self._add_nodes(specs, first_index=max(used, default=-1) + 1, wait=wait_ready)

    async def _add_nodes(
        self, specs: Sequence[NodeSpec], *, first_index: int, wait: bool = True
    ) -> None:
        began = time.monotonic()
        async with self.api_client() as api:
            from kubernetes_asyncio import client

            core: Any = client.CoreV1Api(api)
            gate = asyncio.Semaphore(_CREATE_CONCURRENCY)

            async def create(spec: NodeSpec, index: int) -> None:
                async with gate:
                    await _ok(
                        await core.create_node(node_manifest(spec, index), _preload_content=False)
                    )

            async with asyncio.TaskGroup() as group:
                for offset, spec in enumerate(specs):
                    group.create_task(create(spec, first_index + offset))
            self.nodes.extend(specs)
            if wait:
                await self._wait_ready(core, [spec.name for spec in specs])
                self._progress(f"{len(specs)} nodes Ready in {time.monotonic() - began:.1f}s")

    async def _wait_ready(self, core: Any, names: Iterable[str]) -> None:
        """Until kwok reports every node Ready and the node controller lifted its taints."""
        waiting = set(names)
        timeout = self._startup_timeout + 0.05 * len(waiting)
        interval = 0.2 if len(waiting) <= 200 else 1.0
        deadline = time.monotonic() + timeout
        while True:
            listed = await _ok(await core.list_node(_preload_content=False))
            for item in listed.get("items") or []:
                if _schedulable(item):
                    waiting.discard(name_of(item))
            if not waiting:
                return
            if time.monotonic() > deadline:
                shown = ", ".join(sorted(waiting)[:5])
                raise SimError(
                    f"{len(waiting)} nodes were not Ready within {timeout:.0f}s ({shown}); "
                    f"see the kwok and kube-controller-manager logs in {self.workdir / 'logs'}"
                )
            await asyncio.sleep(interval)

    async def remove_node(self, name: str) -> None:
        """Delete a node, as when a machine leaves the cluster."""
        async with self.api_client() as api:
            from kubernetes_asyncio import client

            core: Any = client.CoreV1Api(api)
            await _ok(await core.delete_node(name, _preload_content=False))
        self.nodes = [spec for spec in self.nodes if spec.name != name]

    async def set_node_labels(self, name: str, labels: Mapping[str, str | None]) -> None:
        """Set (or, with None, remove) labels on a node, as NFD or an admin would."""
        await self._patch_node(name, {"metadata": {"labels": dict(labels)}})

    async def change_kernel(self, name: str, kernel: str) -> None:
        """The node rebooted into another kernel: NFD's kernel labels and nodeInfo change."""
        await self.set_node_labels(name, kernel_labels(kernel))
        await self._patch_node(
            name, {"status": {"nodeInfo": {"kernelVersion": kernel}}}, status=True
        )
        self.nodes = [
            _with_kernel(spec, kernel) if spec.name == name else spec for spec in self.nodes
        ]

    async def set_failing_driver_versions(
        self, versions: Iterable[str], nodes: Iterable[str] | None = None
    ) -> None:
        """Driver `versions` install but fail validation on `nodes` (default: every GPU
        node) from now on; none: every version validates again (`_failing_drivers`)."""
        body = marker_patch(versions)
        for name in self.gpu_nodes if nodes is None else list(nodes):
            await self._patch_node(name, body)

    async def _patch_node(self, name: str, body: dict[str, Any], *, status: bool = False) -> None:
        async with self.api_client() as api:
            from kubernetes_asyncio import client

            core: Any = client.CoreV1Api(api)
            call = core.patch_node_status if status else core.patch_node
            await _ok(
                await call(
                    name,
                    body,
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                )
            )


def _gate_pod_ready(stages: Sequence[Path], folder: Path) -> list[Path]:
    """kwok's stages, its `pod-ready` stage replaced by a copy in `folder` that starts a
    pod asking for GPUs only once the simulated kubelet admitted it (`gpusim._admission`).
    """
    out: list[Path] = []
    for path in stages:
        documents = list(yaml.safe_load_all(path.read_text()))
        gated = [gate_pod_ready(d) if isinstance(d, dict) else None for d in documents]
        if not any(gated):
            out.append(path)
            continue
        folder.mkdir(parents=True, exist_ok=True)
        copy = folder / path.name
        kept = [new or old for new, old in zip(gated, documents, strict=True)]
        copy.write_text(yaml.safe_dump_all(kept, sort_keys=False))
        out.append(copy)
    if out == list(stages):
        raise SimError(
            f"kwok's pod-ready stage is missing in {stages[0].parent}; "
            "run `bash hack/build-binaries.sh` to install kwok's stages"
        )
    return out


def _with_kernel(spec: NodeSpec, kernel: str) -> NodeSpec:
    from dataclasses import replace

    return replace(spec, kernel=kernel)


def _schedulable(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = (node.get("spec") or {}).get("taints") or []
    return ready and not any(t.get("key") in _NOT_READY_TAINTS for t in taints)


def _check_port_free(port: int) -> None:
    import socket

    if not 1 <= port <= 65535:
        raise SimError(f"port {port} is not a valid TCP port (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise SimError(
                f"port {port} is already in use; pick a free one or leave the port out"
            ) from None
