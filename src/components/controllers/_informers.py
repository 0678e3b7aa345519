"""The informers the controllers read from, each with one scope shared by every user.

The cache holds one informer per kind, so the scope of each kind is decided here, once:

* cluster-wide: ClusterPolicy, NVIDIADriver, Node (trimmed to what the controllers read,
  `_cached_shapes`);
* cluster-wide Pods bound to a node (`SCHEDULED_PODS`; trimmed likewise), but not the
  pods of operands judged by their DaemonSet's counts alone (`CACHED_PODS`): the driver's
  and validator's pods, and the GPU pods a driver upgrade must move off a node (the
  upgrade controller shares it);
* the operator's namespace: ControllerRevisions (the DaemonSets' revisions that readiness
  is judged from; trimmed of their data);
* everything we render, scoped to the operator's namespace when namespaced, and selected
  by `app.kubernetes.io/managed-by=gpu-operator`, so a 5,000-node cluster's own
  ClusterRoles never enter the cache; ConfigMaps and DaemonSets are the exceptions, every
  one in the operator's namespace is cached: a policy may name the user's own ConfigMaps
  (their keys are mounted one by one), and the upgrade controller shares the DaemonSets;
* cluster-wide PodDisruptionBudgets: a budget's change may let a waiting eviction pass
  (driver drain, MIG-change clearing);
* the ServiceMonitor CRD alone (a field selector on its name), to know whether
  prometheus-operator is installed.

Another controller that needs one of these kinds must come through here too.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.api import (
    COMPONENT_LABEL,
    DRIVER_TAKEOVER_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MIG_CONFIG_STATE_LABEL,
)
from components.controllers._cached_shapes import (
    NODE_DROP,
    POD_DROP,
    REVISION_DROP,
    DaemonSetAsRead,
    NodeAsRead,
    PodAsRead,
)
from components.controllers._constants import (
    CACHED_PODS,
    CLUSTER_POLICY,
    CONTROLLER_REVISION,
    CRD,
    DAEMONSET,
    GPU_CLUSTER,
    NODE,
    NVIDIA_DRIVER,
    PDB,
    POD,
    RESOURCE_CLAIM,
    SCHEDULED_PODS,
    SERVICE_MONITOR_CRD,
)
from components.controllers._labels import has_gpu
from components.controllers._readiness import DaemonSetPodTally, tally_on
from components.upgrade import POD_NODE_INDEX, pod_as_read, pod_node
from reconciler import GVK, Informer, Manager, Object, labels_of
from reconciler.kinds import CONFIG_MAP

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"


NAMESPACED_OWNED: tuple[GVK, ...] = (
    GVK("", "v1", "ServiceAccount"),
    CONFIG_MAP,
    GVK("", "v1", "Service"),
    GVK("rbac.authorization.k8s.io", "v1", "Role"),
    GVK("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    DAEMONSET,
)
"""Namespaced kinds the renderers make (more are added as they first appear)."""

CLUSTER_OWNED: tuple[GVK, ...] = (
    GVK("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    GVK("node.k8s.io", "v1", "RuntimeClass"),
)
"""Cluster-scoped kinds the renderers make."""

UNSELECTED = frozenset({CONFIG_MAP, DAEMONSET})
"""Owned kinds cached without the managed-by selector (see the module's docstring)."""


def cluster_policies(manager: Manager) -> Informer:
    return manager.informer(CLUSTER_POLICY)


def nvidia_drivers(manager: Manager) -> Informer:
    return manager.informer(NVIDIA_DRIVER)


def gpu_clusters(manager: Manager) -> Informer:
    """GPUClusters: only where their CRD is installed (`setup_operator(gpu_cluster=...)`)."""
    return manager.informer(GPU_CLUSTER)


def resource_claims(manager: Manager) -> Informer:
    """ResourceClaims in every namespace: a GPUCluster's deletion waits for the ones
    allocated on its GPUs."""
    return manager.informer(RESOURCE_CLAIM)


GPU_NODE_INDEX = "gpu-node"
"""Nodes with a GPU (`has_gpu`), under `"true"`: the policy's reconcile reads them on every
turn, and judging every node's labels there cost 11% of the operator's CPU at 5,000 nodes.
An index is kept up as each node event comes, once per change instead of once per turn."""
TAKEOVER_NODE_INDEX = "driver-takeover"
"""Nodes carrying `DRIVER_TAKEOVER_LABEL`, under `"true"` (read by every policy reconcile)."""


def _gpu_node(node: Object) -> tuple[str, ...]:
    return ("true",) if has_gpu(labels_of(node)) else ()


def _taken_over(node: Object) -> tuple[str, ...]:
    return ("true",) if DRIVER_TAKEOVER_LABEL in labels_of(node) else ()


def nodes(manager: Manager) -> Informer:
    return manager.informer(
        NODE,
        drop=NODE_DROP,
        schema=NodeAsRead,
        indexers={GPU_NODE_INDEX: _gpu_node, TAKEOVER_NODE_INDEX: _taken_over},
    )


def pods(manager: Manager) -> Informer:
    return manager.informer(
        POD,
        field_selector=SCHEDULED_PODS,
        label_selector=CACHED_PODS,
        drop=POD_DROP,
        transform=pod_as_read,
        schema=PodAsRead,
    )


def pods_by_node(manager: Manager) -> Informer:
    """Pods, indexed by node with the upgrade's own index (one index, two readers)."""
    informer = pods(manager)
    informer.add_indexers({POD_NODE_INDEX: pod_node})
    return informer


def mig_nodes(manager: Manager) -> Informer:
    """Nodes, indexed by their MIG manager's state (the MIG-change clearing asks which
    nodes wait)."""
    return manager.informer(
        NODE, drop=NODE_DROP, schema=NodeAsRead, index_labels=(MIG_CONFIG_STATE_LABEL,)
    )


def pdbs(manager: Manager) -> Informer:
    """PodDisruptionBudgets, cluster-wide and whole (the upgrade's drain reads them too)."""
    return manager.informer(PDB)


def controller_revisions(manager: Manager, namespace: str) -> Informer:
    return manager.informer(CONTROLLER_REVISION, namespace=namespace, drop=REVISION_DROP)


def service_monitor_crd(manager: Manager) -> Informer:
    return manager.informer(CRD, field_selector=f"metadata.name={SERVICE_MONITOR_CRD}")


def owned(manager: Manager, gvk: GVK, namespace: str | None) -> Informer:
    """The informer of a kind we render: `namespace` for namespaced kinds, else None."""
    selector = None if gvk in UNSELECTED else MANAGED_SELECTOR
    return manager.informer(
        gvk,
        namespace=namespace,
        label_selector=selector,
        index_labels=(COMPONENT_LABEL,),
        schema=DaemonSetAsRead if gvk == DAEMONSET else None,
    )


def config_maps(manager: Manager, namespace: str) -> Informer:
    return owned(manager, CONFIG_MAP, namespace)


def is_owned_kind(informer: Informer) -> bool:
    """Whether the informer is one of `owned()`'s (what the renderers make)."""
    return informer.label_selector == MANAGED_SELECTOR or (
        informer.gvk in UNSELECTED and informer.label_selector is None
    )


def owned_informers(manager: Manager, namespace: str) -> list[Informer]:
    """Every owned kind known up front (ServiceMonitor and others come when first rendered)."""
    out = [owned(manager, gvk, namespace) for gvk in NAMESPACED_OWNED]
    out += [owned(manager, gvk, None) for gvk in CLUSTER_OWNED]
    return out


def register_all(manager: Manager, namespace: str) -> list[Informer]:
    """Every informer the controllers need, so the manager syncs them all before starting."""
    base: Iterable[Informer] = (
        cluster_policies(manager),
        nvidia_drivers(manager),
        nodes(manager),
        pods(manager),
        mig_nodes(manager),
        pods_by_node(manager),
        pdbs(manager),
        controller_revisions(manager, namespace),
        service_monitor_crd(manager),
    )
    return [*base, *owned_informers(manager, namespace)]


def register_gpu_cluster(
    manager: Manager, namespace: str, kinds: Iterable[tuple[GVK, bool]]
) -> list[Informer]:
    """What the GPUCluster controller adds: its kind, ResourceClaims, and the kinds its
    operands render that no ClusterPolicy operand does (`kinds`: each with whether it is
    namespaced, i.e. lives in `namespace`)."""
    known = set(NAMESPACED_OWNED) | set(CLUSTER_OWNED)
    out = [gpu_clusters(manager), resource_claims(manager)]
    for gvk, namespaced in kinds:
        if gvk not in known:
            out.append(owned(manager, gvk, namespace if namespaced else None))
    return out


def daemonset_pods(manager: Manager, namespace: str) -> DaemonSetPodTally:
    """The operand DaemonSets' pods in `namespace`, counted from the shared pods informer
    (one tally, whichever controller asks first)."""
    return tally_on(pods(manager), namespace)
