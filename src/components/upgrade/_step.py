"""What a step is: the node and what is on it in (`NodeContext`), the step out (`Step`,
with its `Transition`), and the few ways the planner builds one.

`NodeContext.outdated` is the one rule for "this driver pod must be replaced": the walk
starts on it, and validation and recovery check it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from components.api import UpgradeState
from components.upgrade._model import NodeView, PdbView
from components.upgrade._names import (
    CORDONED_AT,
    FAILED_STATE,
    INITIALLY_UNSCHEDULABLE,
    RESTART_ONLY,
    RETRIES,
    UPGRADE_REQUESTED,
)
from components.upgrade._pods import PodView

S = UpgradeState

DEFAULT_VALIDATION_TIMEOUT = 600.0
"""Seconds a node may spend in validation-required (the reference's constant)."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A write to the node: a new state (None removes the label) and what goes with it."""

    to: UpgradeState | None
    reason: str = ""
    """One sentence for the event, the log, and (for warnings) the node's message."""
    warning: bool = False
    unschedulable: bool | None = None
    annotations: Mapping[str, str | None] = field(default_factory=dict)
    """Annotations to set (None removes); the patch adds the bookkeeping ones."""
    pin_kernel: str | None = None
    """Move the node's kernel pin here ("" removes it): its driver DaemonSet changes."""
    release_takeover: bool = False
    """Remove `DRIVER_TAKEOVER_LABEL`: the reference's driver pod goes, ours comes."""
    clients: bool | None = None
    """False pauses the driver's clients (`CLIENT_DEPLOY_LABELS`, each from `true`), True
    resumes them (each from our pause); None leaves them. Another agent's value is never
    written over."""


@dataclass(frozen=True, slots=True)
class Step:
    """The next step for one node."""

    transition: Transition | None = None
    delete: tuple[PodView, ...] = ()
    evict: tuple[PodView, ...] = ()
    record_kernel: str | None = None
    """Record this kernel on the driver pod (what it serves)."""
    wait: str = ""
    """Why nothing more happens now (shown in status)."""
    requeue_after: float | None = None
    """A timeout that will fire if no event comes first."""
    explains: bool = False
    """`wait` names what holds the node (pods, a PodDisruptionBudget, a process on the
    GPU, a failure and its retry): told in an Event each time it changes."""

    @property
    def empty(self) -> bool:
        return not (self.transition or self.delete or self.evict or self.record_kernel)


@dataclass(frozen=True, slots=True)
class NodeContext:
    """One node and what is on it, from the cache."""

    node: NodeView
    driver: PodView | None = None
    target_revision: str | None = None
    """The driver DaemonSet's newest revision hash (None when not known)."""
    target_digest: str | None = None
    """The `DRIVER_CONFIG_DIGEST` of the driver DaemonSet's template (None when it has
    none)."""
    pods: Sequence[PodView] = ()
    """Every pod bound to the node."""
    pdbs: Sequence[PdbView] = ()
    operator_pod: tuple[str, str] | None = None
    precompiled: bool | None = None
    """Whether the policy wants precompiled drivers (None: not known, keep the pod's kind)."""
    agent: bool = False
    """The node agent is on (`nodeAgent.enabled`): its GPUValidated answers validation."""
    replacing: bool = False
    """The driver pod is the reference operator's, its DaemonSet fenced for the takeover
    (`components.api.is_fenced`): ours replaces it through the walk."""

    def outdated(self, *, requested: bool = True) -> str | None:
        """Why the driver pod must be replaced, or None when it is in sync."""
        d = self.driver
        if d is None:
            return None
        if self.replacing:
            return f"driver pod {d.key} is the reference operator's; ours replaces it"
        if self.target_revision is not None and d.revision != self.target_revision:
            return (
                f"driver pod {d.key} runs revision {d.revision or '(none)'}, "
                f"its DaemonSet's newest is {self.target_revision}"
            )
        if self.precompiled is not None and d.pinned != self.precompiled:
            if self.precompiled:
                return f"the policy now uses precompiled drivers; driver pod {d.key} is not one"
            return f"the policy no longer uses precompiled drivers; driver pod {d.key} is one"
        kernel = self.node.kernel
        if d.kernel is not None and kernel is not None and d.kernel != kernel:
            return f"driver pod {d.key} serves kernel {d.kernel}, the node runs {kernel}"
        if requested and self.node.upgrade_requested:
            return "an upgrade was requested on the node"
        return None

    @property
    def driver_ready(self) -> bool:
        d = self.driver
        return (
            d is not None
            and not d.terminating
            and d.ready
            and self.outdated(requested=False) is None
        )


def move_to(
    state: UpgradeState,
    reason: str = "",
    *,
    warning: bool = False,
    unschedulable: bool | None = None,
    **annotations: str | None,
) -> Step:
    """A step that is only a transition; annotations by short name (`initially`,
    `cordoned`, `requested`, `failed_state`, `restart_only`, `retries`)."""
    return Step(
        transition=Transition(
            state,
            reason,
            warning=warning,
            unschedulable=unschedulable,
            annotations={_ANNOTATION_ARGS[k]: v for k, v in annotations.items()},
        )
    )


_ANNOTATION_ARGS = {
    "initially": INITIALLY_UNSCHEDULABLE,
    "cordoned": CORDONED_AT,
    "requested": UPGRADE_REQUESTED,
    "failed_state": FAILED_STATE,
    "restart_only": RESTART_ONLY,
    "retries": RETRIES,
}


def fail_in(step: UpgradeState, reason: str) -> Step:
    """To upgrade-failed, remembering the state it failed in (the retry redoes that)."""
    return move_to(S.UPGRADE_FAILED, reason, warning=True, failed_state=step.value)


def timed_out(node: NodeView, timeout: float, now: float) -> tuple[bool, float | None]:
    """(expired, seconds left); a timeout of 0 never expires."""
    if timeout <= 0:
        return False, None
    since = node.since if node.since is not None else now
    left = since + timeout - now
    return left <= 0, max(left, 0.0)
