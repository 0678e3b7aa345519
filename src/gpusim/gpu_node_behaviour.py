"""GPU node behaviour: what NVIDIA's software would do on a real GPU node, simulated.

This is the one place where the simulated cluster pretends to have GPUs. kwok makes pods
Running; this controller watches which NVIDIA operand pods run on which node and updates the
node the way the real node software would:

* **driver** pod Running and Ready (or a driver preinstalled on the host) is what every rule
  below needs: without a driver no GPU is usable, so the node has no GPU resources. A
  driver pod replaced by one with the same `DRIVER_CONFIG_DIGEST` (restart-only) keeps the
  loaded driver, and the GPUs usable, while the new one starts (`_node_model.loaded_driver`).
* **device plugin** pod Running -> the node's capacity and allocatable get `nvidia.com/gpu`
  = GPUs on the node; with MIG on, strategy `single` -> `nvidia.com/gpu` = MIG instances,
  strategy `mixed` -> `nvidia.com/mig-<profile>` counts. Device plugin gone -> resources gone.
* **device plugin config**: the ConfigMaps the plugin mounts and the node's
  `nvidia.com/device-plugin.config` label (else its `DEFAULT_CONFIG`) pick a config; one
  with `sharing.mps` or `sharing.timeSlicing` advertises `replicas` x GPUs (as
  `nvidia.com/gpu`, or the renamed resource), with MPS only while an MPS control daemon
  pod is Ready on the node (the real plugin waits for it).
* **VFIO manager** and **sandbox device plugin** pods Running and Ready, and no driver pod
  (a `vm-passthrough` node) -> the GPUs are bound to vfio-pci and advertised as KubeVirt
  expects: `nvidia.com/<MODEL>` (e.g. `nvidia.com/NVIDIA_H100_80GB_HBM3`) = GPUs on the node.
* **GPU feature discovery** pod Running -> the GFD labels (`nvidia.com/gpu.product`,
  `gpu.count`, `gpu.memory`, `mig.capable`, `cuda.driver.major`, ...). Like labels NFD keeps
  from a feature file, they stay when GFD stops; while GFD runs they are kept exact.
* **MIG manager** pod Running and the node label `nvidia.com/mig.config` set -> a layout
  already in place is `success` at once; otherwise `nvidia.com/mig.config.state` goes
  `pending`, GPU clients are paused (operand deploy labels `true` ->
  `paused-for-mig-change`) until their pods are gone, the change waits while any workload
  pod holds the node's GPUs (real mig-parted refuses to repartition a GPU in use), the
  layout is applied after `mig_reconfigure_seconds`, then `success` (or `failed` for a
  config the GPU cannot apply) and the paused labels go back to `true`.

* **a failing driver version** (the node annotation
  `sim.gpu-operator.io/failing-driver-versions`): the driver pod turns Ready, but the
  validator pods never start (kwok's gate waits for this controller to let them) and the
  node agent's NVML does not initialise (`gpusim._failing_drivers`).
* **node agent** pod Running and Ready -> the product's node agent looks at the node
  through a simulated NVML built from its hardware (`gpusim._node_agents`) and publishes
  its conditions and GPU processes, as the real pod would (the annotation
  `sim.gpu-operator.io/xids` makes a GPU raise an XID).
* **DRA kubelet plugin** pod (`app: nvidia-dra-driver-kubelet-plugin`) Running and Ready,
  with a driver loaded -> the node's GPUs (or MIG instances) are published as a
  `gpu.nvidia.com` ResourceSlice, written as the pod's own ServiceAccount with a token bound
  to the pod; plugin gone -> slice gone (`gpusim._dra`). kube-scheduler allocates claims
  against them.
* **the kubelet's device admission**: a pod bound to the node that asks for `nvidia.com/`
  resources starts only if the node's plugins offer enough of them now, less what the
  pods admitted before hold; otherwise it is failed (`UnexpectedAdmissionError`) as a
  real kubelet's device manager fails it, and never runs (`gpusim._admission`; kwok's
  `pod-ready` stage waits for the admission annotation this writes).

The MIG strategy is read the way the real pods read it: the `MIG_STRATEGY` env of the device
plugin (then GFD) container, else the node label `nvidia.com/mig.strategy`, else `single`.
The driver version comes from the driver pod's image tag (`driver:595.91.07-ubuntu22.04`).

What hardware a node has is in its `sim.gpu-operator.io/*` annotations (written when the
node is created); the MIG mode the GPUs are in is kept there too (`.../mig-applied`), as it
survives pod restarts on real hardware.

Decisions are a pure function (`gpusim._node_model.plan_node`). This module is only the
controller that applies them, written the way an operator author uses our engine
(`reconciler`): a Manager's informers cache nodes and pods (trimmed to what the model
reads), predicates drop the events that change nothing the model reads, the work queue
collapses bursts per node, and the reconcile writes the plan's differences as merge
patches. The engine thus has a second user beside the operator.

Run alone: `python -m gpusim.gpu_node_behaviour --kubeconfig PATH`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpusim._admission import ANNOTATION_ADMITTED, admit, device_pod, offered_counts
from gpusim._dra import ApiEndpoint, DraKubeletPlugins
from gpusim._failing_drivers import driver_fails, is_validator, validator_writes
from gpusim._node_agents import SimulatedNodeAgents, node_facts
from gpusim._node_model import MigProgress, driver_version, plan_node
from gpusim._node_software import (
    LABEL_PLUGIN_CONFIG,
    NodeSoftware,
    PodInfo,
    gpu_workload,
    gpu_workload_node,
    node_info,
    pod_info,
    trim_node,
    trim_pod,
)
from reconciler import (
    Funcs,
    Manager,
    Object,
    Request,
    Result,
    enqueue_mapped,
    enqueue_object,
    metadata_of,
    name_of,
    namespace_of,
    resource_version_of,
)
from reconciler.errors import NotFound
from reconciler.kinds import CONFIG_MAP, NODE, POD

log = logging.getLogger("gpusim.gpu_node_behaviour")

FIELD_MANAGER = "gpu-node-behaviour"
PODS_BY_NODE = "gpusim.node"
"""Index of the node-software pods (and GPU workload pods, and pods asking for device
resources) by the node they are bound to."""
AGENT_SECONDS = 5.0
"""How often a simulated node agent looks again with nothing new (changes wake it)."""
PODS_BY_CONFIG_MAP = "gpusim.config-map"
"""Index of the node-software pods by the ConfigMaps (`namespace/name`) they mount."""


def _config_maps_of(pod: Object) -> Iterable[str]:
    info = pod_info(pod)
    return info.config_maps if info is not None else ()


def _trim_config_map(obj: dict[str, Any]) -> dict[str, Any]:
    meta = metadata_of(obj)
    kept = {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}
    return {"metadata": kept, "data": dict(obj.get("data") or {})}


def _software_pod_node(pod: Object) -> Iterable[str]:
    info = pod_info(pod)
    if info is not None:
        return (info.node,)
    node = gpu_workload_node(pod)
    if node is None and (admission := device_pod(pod)) is not None:
        node = admission.node
    return (node,) if node is not None else ()


def _node_of_pod(pod: Object) -> Iterable[Request]:
    return [Request("", node) for node in _software_pod_node(pod)]


def _node_facts_changed(old: Object, new: Object) -> bool:
    """Whether the model would see a difference (a new resourceVersion alone is none)."""
    return replace(node_info(old), resource_version=0) != replace(
        node_info(new), resource_version=0
    )


def _pod_facts_changed(old: Object, new: Object) -> bool:
    return (
        pod_info(old) != pod_info(new)
        or gpu_workload_node(old) != gpu_workload_node(new)
        or gpu_workload(old) != gpu_workload(new)
        or device_pod(old) != device_pod(new)
    )


def _version(obj: Object) -> int:
    try:
        return int(resource_version_of(obj) or 0)
    except ValueError:
        return 0


class GpuNodeBehaviour:
    """Reconciles each GPU node to what `plan_node` says its NVIDIA software would do.

    Registers its informers and controller on `manager`; `manager.run()` runs it. What it
    remembers between reconciles is only what real node software keeps in memory: the MIG
    reconfigurations under way (and the version of its own last write per node, so a
    reconcile never plans from a cache that has not seen that write yet), and the pods it
    admitted or refused whose write its cache has not shown yet.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        mig_reconfigure_seconds: float = 1.0,
        workers: int = 8,
        agent_seconds: float = AGENT_SECONDS,
        dra_endpoint: ApiEndpoint | None = None,
    ) -> None:
        self._client = manager.client
        self.agents = SimulatedNodeAgents(manager.client)
        self._agent_seconds = agent_seconds
        self._mig_seconds = mig_reconfigure_seconds
        self._mig: dict[str, MigProgress] = {}
        self._written: dict[str, int] = {}
        self._admitted: dict[str, set[str]] = {}
        self._rejected: dict[str, set[str]] = {}
        self.writes = 0
        nodes = manager.informer(NODE, transform=trim_node)
        pods = manager.informer(
            POD,
            transform=trim_pod,
            indexers={PODS_BY_NODE: _software_pod_node, PODS_BY_CONFIG_MAP: _config_maps_of},
        )
        # The device plugin's configs (MPS or time-slicing shares each GPU).
        config_maps = manager.informer(CONFIG_MAP, transform=_trim_config_map)
        controller = manager.controller(
            "gpu-node-behaviour", self.reconcile, max_concurrent_reconciles=workers
        )
        controller.watch(nodes, enqueue_object, Funcs(update=_node_facts_changed))
        controller.watch(pods, enqueue_mapped(_node_of_pod), Funcs(update=_pod_facts_changed))
        controller.watch(config_maps, enqueue_mapped(self._nodes_mounting))
        # NVIDIA's DRA kubelet plugin, where one runs (`gpusim._dra`).
        self.dra = (
            DraKubeletPlugins(manager, dra_endpoint, workers=workers)
            if dra_endpoint is not None
            else None
        )

    async def reconcile(self, request: Request) -> Result | None:
        name = request.name
        node = self._client.get(NODE, name)
        if node is None:
            self._mig.pop(name, None)
            self._written.pop(name, None)
            self._admitted.pop(name, None)
            self._rejected.pop(name, None)
            self.agents.forget(name)
            return None
        if _version(node) < self._written.get(name, 0):
            return None  # the event of our own last write is on its way, and requeues
        on_node = self._client.list(POD, index=(PODS_BY_NODE, name))
        pods = [info for info in map(pod_info, on_node) if info is not None]
        plan = plan_node(
            node_info(node),
            pods,
            now=time.monotonic(),
            mig=self._mig.get(name),
            mig_reconfigure_seconds=self._mig_seconds,
            gpu_workloads=sum(1 for p in on_node if gpu_workload_node(p) == name),
            plugin_config=self._plugin_config(node, pods),
        )
        # Resources first: whoever sees `mig.config.state=success` finds them in place.
        if plan.resources:
            body = {"status": {"capacity": plan.resources, "allocatable": plan.resources}}
            await self._patch(name, body, plan.resources, subresource="status")
        if plan.labels or plan.annotations:
            meta: dict[str, Any] = {}
            if plan.labels:
                meta["labels"] = plan.labels
            if plan.annotations:
                meta["annotations"] = plan.annotations
            await self._patch(name, {"metadata": meta}, plan.labels)
        # Remembered only once written: a failed write retries the same step.
        if plan.mig is None:
            self._mig.pop(name, None)
        else:
            self._mig[name] = plan.mig
        # After the resources: a pod is admitted against what the node offers from now on.
        await self._admit(name, on_node, plan.offered)
        failing = driver_fails(node_info(node).annotations, pods)
        await self._validators(name, failing, on_node)
        again = plan.recheck_after
        if await self._agent(node, pods, on_node):
            again = min(again if again is not None else self._agent_seconds, self._agent_seconds)
        if again is not None:
            return Result(requeue_after=max(again, 0.001))
        return None

    async def _agent(
        self, node: Object, pods: Sequence[PodInfo], on_node: Iterable[Object]
    ) -> bool:
        """Let the node's agent look, where its pod runs; whether it did."""
        info = node_info(node)
        hardware = info.hardware
        ready = {p.software: p for p in pods if p.ready}
        if hardware is None or NodeSoftware.NODE_AGENT not in ready:
            self.agents.forget(info.name)
            return False
        driver_pod = ready.get(NodeSoftware.DRIVER)
        # Against a host driver a driver container never gets to publish its root.
        serving = driver_pod is not None and not hardware.host_driver
        driver = hardware.host_driver or (driver_version(driver_pod.image) if driver_pod else None)
        facts = node_facts(
            info,
            hardware,
            driver=driver or None,
            driver_container=serving,
            toolkit=NodeSoftware.CONTAINER_TOOLKIT in ready,
            # The pods that hold its GPUs (a pod bound to vfio-pci GPUs runs no process).
            workloads=[
                w for w in map(gpu_workload, filter(gpu_workload_node, on_node)) if w is not None
            ],
        )
        failing = driver_fails(info.annotations, [driver_pod] if driver_pod else [])
        await self.agents.step(info.name, facts, failing=failing)
        return True

    async def _validators(self, name: str, failing: str | None, on_node: Sequence[Object]) -> None:
        """Let the node's validator pods start, or keep them from being Ready under a
        failing driver version."""
        validators = [p for p in on_node if is_validator(p)]
        for write in validator_writes(name, failing, validators):
            sub = "status" if write.status else None
            if await self._patch_pod(write.key, write.body, subresource=sub) and failing:
                log.info("%s: validator %s not Ready: %s", name, write.key, write.why)

    async def _admit(
        self, name: str, on_node: Sequence[Object], offered: Mapping[str, str]
    ) -> None:
        """The kubelet's device admission for the pods bound to the node that wait for it:
        the annotation that lets kwok start a pod, or the status that fails it."""
        pods = [p for p in map(device_pod, on_node) if p is not None and p.node == name]
        present = {p.uid for p in pods}
        # What the cache shows now (or what is gone) needs remembering no more.
        admitted = self._admitted.setdefault(name, set())
        admitted.intersection_update(present - {p.uid for p in pods if p.admitted})
        rejected = self._rejected.setdefault(name, set())
        rejected.intersection_update(present)
        waiting = [p for p in pods if p.uid not in rejected]
        decision = admit(offered_counts(offered), waiting, admitted=admitted)
        for pod in decision.admitted:
            body = {"metadata": {"annotations": {ANNOTATION_ADMITTED: "true"}}}
            if await self._patch_pod(pod.key, body):
                admitted.add(pod.uid)
                log.info("%s: admitted %s", name, pod.key)
        for pod, why in decision.rejected:
            if await self._patch_pod(pod.key, {"status": why.status}, subresource="status"):
                rejected.add(pod.uid)
                log.info("%s: rejected %s: %s: %s", name, pod.key, why.reason, why.message)

    async def _patch_pod(
        self, key: str, body: dict[str, Any], *, subresource: str | None = None
    ) -> bool:
        """Whether the pod was written (False: it is gone)."""
        namespace, _, name = key.partition("/")
        try:
            await self._client.patch(
                POD,
                name,
                body,
                namespace=namespace,
                subresource=subresource,
                quiet=True,
                whole_answer=False,
            )
        except NotFound:
            return False
        self.writes += 1
        return True

    def _nodes_mounting(self, config_map: Object) -> list[Request]:
        key = f"{namespace_of(config_map)}/{name_of(config_map)}"
        pods = self._client.list(POD, index=(PODS_BY_CONFIG_MAP, key))
        return [Request("", info.node) for info in map(pod_info, pods) if info is not None]

    def _plugin_config(self, node: Object, pods: Sequence[PodInfo]) -> str | None:
        """The device-plugin config the node uses, as the plugin's config manager picks
        it: the node's label, else the plugin's `DEFAULT_CONFIG`, out of its ConfigMaps."""
        plugin = next((p for p in pods if p.software is NodeSoftware.DEVICE_PLUGIN), None)
        if plugin is None:
            return None
        selected = node_info(node).labels.get(LABEL_PLUGIN_CONFIG) or plugin.env.get(
            "DEFAULT_CONFIG"
        )
        if not selected:
            return None
        for key in plugin.config_maps:
            namespace, _, name = key.partition("/")
            config_map = self._client.get(CONFIG_MAP, name, namespace)
            data = (config_map or {}).get("data") or {}
            if selected in data:
                return str(data[selected])
        return None

    async def _patch(
        self,
        name: str,
        body: dict[str, Any],
        shown: Mapping[str, str | None],
        *,
        subresource: str | None = None,
    ) -> None:
        written = await self._client.patch(NODE, name, body, subresource=subresource, quiet=True)
        self.writes += 1
        self._written[name] = max(self._written.get(name, 0), _version(written))
        if shown:
            text = ", ".join(f"{k}={'-' if v is None else v}" for k, v in sorted(shown.items()))
            log.info("%s: %s", name, text)


# -- as its own process --------------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> None:
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(args.kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = max(args.workers * 2, 16)
    async with client.ApiClient(configuration) as api:
        manager = Manager(api, field_manager=FIELD_MANAGER, bind_address=None, handle_signals=True)
        behaviour = GpuNodeBehaviour(
            manager,
            mig_reconfigure_seconds=args.mig_reconfigure_seconds,
            workers=args.workers,
            dra_endpoint=ApiEndpoint(str(configuration.host), configuration.ssl_ca_cert),
        )
        running = asyncio.create_task(manager.run())
        leading = asyncio.create_task(manager.wait_leading())
        await asyncio.wait({running, leading}, return_when=asyncio.FIRST_COMPLETED)
        if manager.is_leader:
            log.info("gpu node behaviour: watching nodes and operand pods")
            if args.ready_file:
                await asyncio.to_thread(Path(args.ready_file).write_text, "ready\n")
        leading.cancel()
        try:
            await running
        finally:
            behaviour.agents.close()
            if behaviour.dra is not None:
                await behaviour.dra.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gpusim.gpu_node_behaviour",
        description="Simulate NVIDIA node software on kwok nodes (device plugin, GFD, MIG).",
    )
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--mig-reconfigure-seconds", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--ready-file", type=Path, help="written once the first sync is done")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
