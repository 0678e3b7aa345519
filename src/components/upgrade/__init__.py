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
"""

from components.upgrade._clearing import (
    Blocker,
    ClearPlan,
    deletion_plan,
    disruption_blocker,
    drain_plan,
    gpu_pods,
    jobs_running,
)
from components.upgrade._controller import (
    NODE_CONTROLLER,
    POOL_CONTROLLER,
    POOL_REQUEST,
    Pool,
    UpgradeController,
)
from components.upgrade._limits import Counts, admit, counts, max_unavailable
from components.upgrade._metrics import UpgradeMetrics, upgrade_metrics_for
from components.upgrade._model import (
    NodeView,
    PdbView,
    PodView,
    format_time,
    format_time_ms,
    is_driver_pod,
    is_validator_pod,
    newest_revision,
    node_view,
    parse_time,
    pdb_view,
    pick_driver_pod,
    pod_view,
)
from components.upgrade._names import (
    CORDON_SETTLE_SECONDS,
    CORDONED_AT,
    CORDONED_BY_US,
    DRAIN_SKIP_LABEL,
    DRIVER_KERNEL_ANNOTATION,
    EVENT_REASON,
    FAILED_STATE,
    IN_PROGRESS,
    INITIALLY_UNSCHEDULABLE,
    MESSAGE,
    NODE_ANNOTATIONS,
    SKIP_LABEL,
    STATE_LABEL,
    STATE_SINCE,
    STATUS_FIELD_MANAGER,
    UPGRADE_REQUESTED,
    VALIDATOR_APP,
    parse_state,
)
from components.upgrade._patches import annotation_changes, transition_patch
from components.upgrade._pin import PinChange, pin_change
from components.upgrade._planner import (
    DEFAULT_VALIDATION_TIMEOUT,
    NodeContext,
    Step,
    Transition,
    cleanup,
    plan_node,
)
from components.upgrade._selectors import (
    Selector,
    SelectorError,
    label_selector_matches,
    parse_selector,
)
from components.upgrade._status import status_body, upgrade_status
from components.upgrade._tracker import WriteTracker
from components.upgrade._validation import Validation, validate

__all__ = [
    "CORDONED_AT",
    "CORDONED_BY_US",
    "CORDON_SETTLE_SECONDS",
    "DEFAULT_VALIDATION_TIMEOUT",
    "DRAIN_SKIP_LABEL",
    "DRIVER_KERNEL_ANNOTATION",
    "EVENT_REASON",
    "FAILED_STATE",
    "INITIALLY_UNSCHEDULABLE",
    "IN_PROGRESS",
    "KERNEL_LABEL",
    "MESSAGE",
    "NODE_ANNOTATIONS",
    "NODE_CONTROLLER",
    "POOL_CONTROLLER",
    "POOL_REQUEST",
    "SKIP_LABEL",
    "STATE_LABEL",
    "STATE_SINCE",
    "STATUS_FIELD_MANAGER",
    "UPGRADE_REQUESTED",
    "VALIDATOR_APP",
    "Blocker",
    "ClearPlan",
    "Counts",
    "NodeContext",
    "NodeView",
    "PdbView",
    "PinChange",
    "PodView",
    "Pool",
    "Selector",
    "SelectorError",
    "Step",
    "Transition",
    "UpgradeController",
    "UpgradeMetrics",
    "Validation",
    "WriteTracker",
    "admit",
    "annotation_changes",
    "cleanup",
    "counts",
    "deletion_plan",
    "disruption_blocker",
    "drain_plan",
    "format_time",
    "format_time_ms",
    "gpu_pods",
    "is_driver_pod",
    "is_validator_pod",
    "jobs_running",
    "label_selector_matches",
    "max_unavailable",
    "newest_revision",
    "node_view",
    "parse_selector",
    "parse_state",
    "parse_time",
    "pdb_view",
    "pick_driver_pod",
    "pin_change",
    "plan_node",
    "pod_view",
    "status_body",
    "transition_patch",
    "upgrade_metrics_for",
    "upgrade_status",
    "validate",
]
