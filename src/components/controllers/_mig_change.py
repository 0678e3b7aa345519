"""Clearing a node for a MIG change: when, which pods, and what to tell people. Pure.

A MIG reconfiguration needs every GPU of the node idle: mig-parted refuses to repartition
a GPU that a process holds, and the reference leaves user pods where they are, so the change
fails (or, done by hand, kills the jobs). We clear the node first, the polite way: each GPU
pod goes through the Eviction API, so PodDisruptionBudgets hold, and nothing is removed
without an Event saying so.

*When*: the MIG manager says `nvidia.com/mig.config.state=pending`. It writes that only
after finding the requested layout not in place, so it always means a real change (a
restarted MIG manager whose layout is already applied goes straight to `success`).

*Which*: the node's GPU pods, by the driver upgrade's rule (`components.upgrade`: a pod that
requests `nvidia.com/gpu*` or `nvidia.com/mig-*` and has not finished). A DaemonSet's pod or
a static pod cannot be cleared (it would be back at once); they are reported as blocking.
Pods already terminating are waited for. Unlike the upgrade's podDeletion, a pod without a
controller or with emptyDir data is evicted too: the admin asked for this node's GPUs to be
repartitioned, which ends whatever runs on them, and the eviction says so on the pod.

*With the node agent* (`nodeAgent.enabled`) the node's own word counts too: the agent lists
the GPUs' compute processes and the pods owning them (`nvidia.com/gpu-operator.compute-
processes`). A pod owning one is a GPU pod even if it requests no GPU (a container with
`NVIDIA_VISIBLE_DEVICES=all` sees every GPU), a process no pod owns is a host process that
blocks the change (nothing in the API can end it), and the node is clear only once the
agent lists no process at all: an evicted pod's process may outlive its Pod object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from components.api import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    GpuProcessEntry,
    PodDeletionSpec,
)
from components.upgrade import (
    Blocker,
    PdbView,
    PodView,
    deletion_plan,
    describe,
    disruption_blocker,
)

PENDING = "pending"
EVICTION_REASON = "MIGChangeEviction"
"""Event reason on the node and on each pod evicted for a MIG change."""
BLOCKED_REASON = "MIGChangeBlocked"
"""Event reason on the node, and the ClusterPolicy condition's type, while pods block."""

_EVICT_ALL = PodDeletionSpec(force=True, delete_empty_dir=True)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
"""Seconds between two tries at an eviction a budget refused, doubling. A budget's change
(its `disruptionsAllowed`) brings the node back sooner: this is only the safety net."""


def change_pending(labels: Mapping[str, str]) -> bool:
    """Whether the node waits for its GPUs to be idle before its MIG layout changes."""
    return bool(labels.get(MIG_CONFIG_LABEL)) and labels.get(MIG_CONFIG_STATE_LABEL) == PENDING


@dataclass(frozen=True, slots=True)
class HostProcess:
    """A GPU compute process that no pod owns: the API cannot end it."""

    process: GpuProcessEntry

    def __str__(self) -> str:
        p = self.process
        return f"process {p.pid} on GPU {p.index} (no pod owns it: stop it on the host)"


@dataclass(frozen=True, slots=True)
class Clearing:
    """What clearing one node for its MIG change takes now."""

    evict: tuple[PodView, ...] = ()
    waiting: tuple[PodView, ...] = ()
    """Terminating already: wait for them to go."""
    blocked: tuple[Blocker | HostProcess, ...] = ()
    """Pods no eviction can clear (a DaemonSet's, a static pod), and host processes."""
    processes: tuple[GpuProcessEntry, ...] = ()
    """The compute processes the node agent still lists: the change waits for them."""

    @property
    def clear(self) -> bool:
        """Nothing left on the node's GPUs: the MIG manager may repartition them."""
        return not (self.evict or self.waiting or self.blocked or self.processes)


def _owns_process(pod: PodView, processes: Sequence[GpuProcessEntry]) -> bool:
    return any(
        (e.pod_uid and e.pod_uid == pod.uid) or (e.pod and e.pod == pod.key) for e in processes
    )


def clearing(
    pods: Iterable[PodView],
    recently_evicted: Iterable[str] = (),
    processes: Sequence[GpuProcessEntry] | None = None,
) -> Clearing:
    """The GPU pods to evict, wait for, or report. `recently_evicted` (pod UIDs) are not
    asked again while the cache has not yet shown them terminating. `processes`: the node
    agent's list of the node's compute processes, None when no agent runs."""
    listed = tuple(processes or ())
    if listed:
        pods = [replace(p, gpu=True) if not p.gpu and _owns_process(p, listed) else p for p in pods]
    plan = deletion_plan(pods, _EVICT_ALL)
    asked = set(recently_evicted)
    evict = tuple(p for p in plan.act if p.uid not in asked)
    waiting = plan.waiting + tuple(p for p in plan.act if p.uid in asked)
    host = tuple(HostProcess(e) for e in listed if not e.pod_uid and not e.pod)
    return Clearing(evict, waiting, plan.blocked + host, listed)


def refusal(pod: PodView, pdbs: Sequence[PdbView], server_message: str) -> Blocker:
    """Why an eviction of `pod` was refused, naming the budget when the cache knows it."""
    budget = disruption_blocker(pod, pdbs)
    if budget is not None:
        return Blocker(
            pod,
            f"PodDisruptionBudget {budget.namespace}/{budget.name} allows no disruption now",
        )
    return Blocker(pod, server_message or "eviction refused")


def blocked_message(config: str, blockers: Sequence[Blocker | HostProcess], limit: int = 3) -> str:
    """One sentence for the node's Event and the policy's condition ("" when nothing
    blocks)."""
    if not blockers:
        return ""
    shown = "; ".join(str(b) for b in blockers[:limit])
    more = f" and {len(blockers) - limit} more" if len(blockers) > limit else ""
    what = "GPU pods" if all(isinstance(b, Blocker) for b in blockers) else "GPU users"
    return f"MIG change to {config} waits for {what} to leave: {shown}{more}"


def evicted_message(node: str, config: str) -> str:
    """The Event on an evicted pod."""
    return (
        f"evicted from node {node} through the Eviction API: the node's MIG layout changes "
        f"to {config} ({MIG_CONFIG_LABEL}), which needs its GPUs idle"
    )


def node_evicted_message(config: str, pods: Sequence[PodView]) -> str:
    """The Event on the node after a round of evictions."""
    return f"evicted {describe(pods)} for the MIG change to {config}"


def policy_message(blocked: Mapping[str, str], limit: int = 5) -> str:
    """The ClusterPolicy condition's message: each blocked node and what blocks it."""
    names = sorted(blocked)
    parts = [f"{name}: {blocked[name]}" for name in names[:limit]]
    more = f"; and {len(names) - limit} more nodes" if len(names) > limit else ""
    return "; ".join(parts) + more


def backoff(attempts: int) -> float:
    """Seconds before retrying a refused eviction for the `attempts`-th time (1, 2, 4 ...)."""
    return float(min(BACKOFF_FIRST * 2 ** max(attempts - 1, 0), BACKOFF_MAX))
