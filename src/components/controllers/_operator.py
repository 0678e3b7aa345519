"""The operator process: one Manager with every controller on it.

operator = build_operator(api_client, namespace="gpu-operator", bind_address=None)
task = asyncio.create_task(operator.manager.run())
await operator.manager.wait_leading()
...
operator.manager.stop(); await task
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from components.controllers import _informers
from components.controllers._apply import Applier
from components.controllers._constants import (
    CLUSTER_POLICY,
    DAEMONSET,
    FIELD_MANAGER,
    HASH_ANNOTATION,
    NVIDIA_DRIVER,
)
from components.controllers._mig_clearing import MigClearingController
from components.controllers._node_labels import NodeLabelController
from components.controllers._nvidiadriver import NVIDIADriverController
from components.controllers._orphans import ReplacedDaemonSetPods
from components.controllers._policies import Stacks
from components.controllers.clusterpolicy._controller import ClusterPolicyController
from components.controllers.gpucluster import GPUClusterController, rendered_kinds
from components.metrics import OperatorMetrics
from components.operands import DRA_OPERANDS, Operand
from components.remediation import RemediationController
from components.upgrade import UpgradeController
from reconciler import Controller, LeaderElectionConfig, Manager, MetricsServing, Object, name_of


@dataclass
class Operator:
    """A manager and the controllers on it."""

    manager: Manager
    namespace: str
    metrics: OperatorMetrics
    node_labels: NodeLabelController
    cluster_policy: ClusterPolicyController
    nvidia_driver: NVIDIADriverController
    upgrade: UpgradeController | None
    mig_clearing: MigClearingController
    remediation: RemediationController | None = None
    gpu_cluster: GPUClusterController | None = None

    @property
    def controllers(self) -> list[Controller]:
        return list(self.manager.controllers)


def setup_operator(
    manager: Manager,
    *,
    namespace: str,
    operands: Sequence[Operand] | None = None,
    upgrade: bool = True,
    metrics_serving: MetricsServing | None = None,
    gpu_cluster: bool = True,
) -> Operator:
    """Register the informers and every controller on `manager`: node labels,
    ClusterPolicy, NVIDIADriver, MIG-change clearing, GPUCluster (with `gpu_cluster`:
    its CRD is installed) and (unless `upgrade=False`) the driver upgrade."""
    _informers.register_all(manager, namespace)
    if gpu_cluster:
        _informers.register_gpu_cluster(manager, namespace, rendered_kinds(DRA_OPERANDS))
    applier = Applier(manager, namespace)
    metrics = OperatorMetrics(manager.registry)
    recorder = manager.event_recorder(FIELD_MANAGER)
    stacks = Stacks(manager.client, served=gpu_cluster)
    labels = NodeLabelController(manager, stacks)
    mig_clearing = MigClearingController(
        manager, recorder=recorder, on_blocked_change=lambda: policy.requeue_active()
    )
    policy = ClusterPolicyController(
        manager,
        applier,
        metrics,
        namespace=namespace,
        operands=operands,
        recorder=recorder,
        set_auto_upgrade=not upgrade,
        mig_blocked=mig_clearing.blocked_nodes,
        settling=lambda: upgrades is not None and upgrades.busy(),
        stacks=stacks,
    )
    driver = NVIDIADriverController(
        manager, applier, namespace=namespace, operands=operands, recorder=recorder, stacks=stacks
    )
    cluster = (
        GPUClusterController(
            manager, applier, metrics, stacks, namespace=namespace, recorder=recorder
        )
        if gpu_cluster
        else None
    )
    labels.setup()
    policy.setup()
    driver.setup()
    if cluster is not None:
        cluster.setup()
    mig_clearing.setup()
    # Pods a DaemonSet replaced under its name left behind: no step of a policy's reconcile.
    ReplacedDaemonSetPods(manager, namespace, recorder).setup(
        _informers.owned(manager, DAEMONSET, namespace)
    )
    # One writer per status: the pools' `status.upgrade` and pre-flight's condition go
    # through the writer of the policy's own status.
    writers = {CLUSTER_POLICY.kind: policy.status, NVIDIA_DRIVER.kind: driver.status}

    async def write_upgrade_status(body: Object) -> None:
        await writers[str(body.get("kind"))].write_part(name_of(body), body["status"])

    async def write_preflight_condition(obj: Object, condition: Mapping[str, Any]) -> None:
        await writers[str(obj.get("kind"))].write_condition(obj, condition)

    upgrades = (
        UpgradeController(
            manager,
            namespace=namespace,
            auto_upgrade_gauge=metrics.driver_auto_upgrade_enabled,
            status_sink=write_upgrade_status,
            condition_sink=write_preflight_condition,
        )
        if upgrade
        else None
    )
    remediation = RemediationController(
        manager, recorder=recorder, on_change=lambda: policy.requeue_active()
    )
    remediation.setup()
    return Operator(
        manager,
        namespace,
        metrics,
        labels,
        policy,
        driver,
        upgrades,
        mig_clearing,
        remediation,
        cluster,
    )


def build_operator(
    api_client: Any,
    *,
    namespace: str,
    bind_address: str | None = "0.0.0.0:8081",
    leader_election: LeaderElectionConfig | None = None,
    registry: CollectorRegistry | None = None,
    handle_signals: bool = False,
    operands: Sequence[Operand] | None = None,
    upgrade: bool = True,
    metrics_serving: MetricsServing | None = None,
    freeze_heap_after_sync: bool = False,
    gpu_cluster: bool = True,
) -> Operator:
    """A Manager (field manager `gpu-operator`, the hash annotation on) with every
    controller, for a kubernetes_asyncio `ApiClient`; run it with `operator.manager.run()`."""
    manager = Manager(
        api_client,
        field_manager=FIELD_MANAGER,
        leader_election=leader_election,
        bind_address=bind_address,
        registry=registry,
        hash_annotation=HASH_ANNOTATION,
        handle_signals=handle_signals,
        metrics=metrics_serving,
        freeze_heap_after_sync=freeze_heap_after_sync,
    )
    return setup_operator(
        manager, namespace=namespace, operands=operands, upgrade=upgrade, gpu_cluster=gpu_cluster
    )
