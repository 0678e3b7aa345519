"""Driver upgrades (and kernel changes) node by node: event-driven, within limits, crash-safe.

The reference's state machine and names (node label `nvidia.com/gpu-driver-upgrade-state`,
`upgrade-required` ... `upgrade-done`, `upgrade-failed`), driven by the upgrade policy of
the ClusterPolicy or of the NVIDIADriver that owns the node's driver. Each node moves on as
soon as the event that allows it arrives; maxParallelUpgrades and maxUnavailable are never
exceeded by a step of ours; every bit of state is on the nodes, so a restart (or a kill -9)
anywhere carries on where the cluster says it was.

Wiring (in the manager builder)::

    from components.upgrade import UpgradeController
    UpgradeController(manager, namespace=namespace)

Pure parts, for tests and tools::

    plan_node(NodeContext(node_view(node), driver=pod_view(pod), target_revision="abc"),
              policy, now)                        # -> Step (transition, deletes, evictions)
    admit(nodes, policy)                          # -> names that may start now
    counts(nodes, policy)                         # -> in progress, unavailable, available

Clearing a node of GPU pods (`deletion_plan`, `gpu_pods`, `disruption_blocker`, `pod_view`,
`PodVolumes`, `POD_NODE_INDEX`) is shared with the MIG-change clearing in
`components.controllers`.
"""

from components.upgrade._budget import Halt, failing, halt
from components.upgrade._canary import CanaryGate, canaries, canary_gate
from components.upgrade._clearing import (
    Blocker,
    ClearPlan,
    deletion_plan,
    describe,
    disruption_blocker,
    gpu_pods,
)
from components.upgrade._controller import UpgradeController
from components.upgrade._evictor import PodEvictor
from components.upgrade._fold import Fold, fold, patched
from components.upgrade._limits import admit, counts, max_unavailable
from components.upgrade._metrics import upgrade_metrics_for
from components.upgrade._model import (
    AgentVerdict,
    NodeView,
    PdbView,
    newest_revision,
    node_view,
    pdb_view,
    spec_digest,
    template_digest,
)
from components.upgrade._names import (
    CORDONED_AT,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DEVICE_PLUGIN_PAUSED,
    DRAIN_SKIP_LABEL,
    DRIVER_KERNEL_ANNOTATION,
    EVENT_REASON,
    FAILED_STATE,
    IN_PROGRESS,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    RESTART_ONLY,
    RETRIES,
    SKIP_LABEL,
    STATE_LABEL,
    STATE_SINCE,
    UPGRADE_REQUESTED,
    VALIDATOR_DEPLOY_LABEL,
)
from components.upgrade._node_requests import (
    node_of_pod,
    node_ref,
    node_request,
    nodes_labelled,
)
from components.upgrade._patches import transition_patch
from components.upgrade._pin import PinChange, pin_change
from components.upgrade._planner import cleanup, plan_node
from components.upgrade._pods import PodView, is_driver_pod, pick_driver_pod, pod_as_read, pod_view
from components.upgrade._preflight import driver_image_of
from components.upgrade._reader import POD_NODE_INDEX, pod_node
from components.upgrade._restart import restart_only
from components.upgrade._retry import Backoff, retries, retry_due
from components.upgrade._selectors import SelectorError, label_selector_matches, parse_selector
from components.upgrade._status import status_body, upgrade_status
from components.upgrade._step import NodeContext, Step, Transition
from components.upgrade._times import format_time, format_time_ms, parse_time
from components.upgrade._tracker import WriteTracker
from components.upgrade._volumes import PodVolumes

__all__ = [
    "CORDONED_AT",
    "DEVICE_PLUGIN_DEPLOY_LABEL",
    "DEVICE_PLUGIN_PAUSED",
    "DRAIN_SKIP_LABEL",
    "DRIVER_KERNEL_ANNOTATION",
    "EVENT_REASON",
    "FAILED_STATE",
    "INITIALLY_UNSCHEDULABLE",
    "IN_PROGRESS",
    "MESSAGE",
    "POD_NODE_INDEX",
    "RESTART_ONLY",
    "RETRIES",
    "SKIP_LABEL",
    "STATE_LABEL",
    "STATE_SINCE",
    "UPGRADE_REQUESTED",
    "VALIDATOR_DEPLOY_LABEL",
    "AgentVerdict",
    "Backoff",
    "Blocker",
    "CanaryGate",
    "ClearPlan",
    "Fold",
    "Halt",
    "NodeContext",
    "NodeView",
    "PdbView",
    "PinChange",
    "PodEvictor",
    "PodView",
    "PodVolumes",
    "SelectorError",
    "Step",
    "Transition",
    "UpgradeController",
    "WriteTracker",
    "admit",
    "canaries",
    "canary_gate",
    "cleanup",
    "counts",
    "deletion_plan",
    "describe",
    "disruption_blocker",
    "driver_image_of",
    "failing",
    "fold",
    "format_time",
    "format_time_ms",
    "gpu_pods",
    "halt",
    "is_driver_pod",
    "label_selector_matches",
    "max_unavailable",
    "newest_revision",
    "node_of_pod",
    "node_ref",
    "node_request",
    "node_view",
    "nodes_labelled",
    "parse_selector",
    "parse_time",
    "patched",
    "pdb_view",
    "pick_driver_pod",
    "pin_change",
    "plan_node",
    "pod_as_read",
    "pod_node",
    "pod_view",
    "restart_only",
    "retries",
    "retry_due",
    "spec_digest",
    "status_body",
    "template_digest",
    "transition_patch",
    "upgrade_metrics_for",
    "upgrade_status",
]
