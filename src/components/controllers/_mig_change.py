"""Clearing a node for a MIG change: when, which pods, and what to tell people. Pure.

A MIG reconfiguration needs every GPU of the node idle: mig-parted refuses to repartition
a GPU that a process holds, and the reference leaves user pods where they are, so the change
fails (or, done by hand, kills the jobs). We clear the node first, the polite way: each GPU
pod goes through the Eviction API, so PodDisruptionBudgets hold, and nothing is removed
without an Event saying so.

*When*: the MIG manager says `nvidia.com/mig.config.state=pending`. It writes that only
after finding the requested layout not in place, so it always means a real change (a
restarted MIG manager whose layout is already applied goes straight to `success`). Only
a MIG manager of ours counts: the active ClusterPolicy must run it (`migManager.enabled`)
and the node must be one it runs on (MIG-capable, `nvidia.com/gpu.deploy.mig-manager=true`);
a `pending` anyone else writes evicts nothing.

*Which*: the node's GPU pods, by the driver upgrade's rule (`components.upgrade`: a pod that
requests `nvidia.com/gpu*` or `nvidia.com/mig-*` and has not finished), and by `kubectl
drain`'s: a pod without a controller (gone for good once evicted) needs
`migManager.podDeletion.force`, one with emptyDir data (lost) `deleteEmptyDir`. Without
them such a pod refuses the whole node, as it refuses `kubectl drain`: nothing on the node
is evicted, and the pods that hold it are named. A DaemonSet's pod or a static pod cannot
be cleared (it would be back at once) and is skipped as drain skips it, so the others go;
the change still waits for it, and it is named too. Pods already terminating are waited
for.

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
from typing import Any

import pydantic

from components.api import (
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    GpuProcessEntry,
    MIGPodDeletionSpec,
    PodDeletionSpec,
    mig_capable,
    opted_out,
)
from components.upgrade import (
    Blocker,
    PdbView,
    PodView,
    deletion_plan,
    describe,
    disruption_blocker,
    gpu_pods,
)

PENDING = "pending"
EVICTION_REASON = "MIGChangeEviction"
"""Event reason on the node and on each pod evicted for a MIG change."""
BLOCKED_REASON = "MIGChangeBlocked"
"""Event reason on the node, and the ClusterPolicy condition's type, while pods block."""

SECTION = "migManager.podDeletion"
"""Where the admin lets a MIG change evict what `kubectl drain` would refuse to."""

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
"""Seconds between two tries at an eviction a budget refused, doubling. A budget's change
(its `disruptionsAllowed`) brings the node back sooner: this is only the safety net."""


def change_pending(labels: Mapping[str, str]) -> bool:
    """Whether the node waits for its GPUs to be idle before its MIG layout changes."""
    return bool(labels.get(MIG_CONFIG_LABEL)) and labels.get(MIG_CONFIG_STATE_LABEL) == PENDING


def mig_managed(labels: Mapping[str, str]) -> bool:
    """Whether our MIG manager runs on the node: MIG-capable, and selected by its
    DaemonSet's deploy label (the node labeller's; absent on VM nodes and opted-out ones)."""
    return (
        labels.get(MIG_MANAGER_DEPLOY_LABEL) == "true"
        and mig_capable(labels)
        and not opted_out(labels)
    )


def mig_pod_deletion(policy: Mapping[str, Any] | None) -> MIGPodDeletionSpec | None:
    """What a ClusterPolicy object (raw, as cached; the active one) lets a MIG change
    evict; None when there is no policy or it runs no MIG manager."""
    if policy is None:
        return None
    spec = policy.get("spec")
    manager = spec.get("migManager") if isinstance(spec, Mapping) else None
    if not isinstance(manager, Mapping):
        return MIGPodDeletionSpec()  # absent (or null): the MIG manager's defaults, enabled
    if manager.get("enabled") is False:
        return None
    raw = manager.get("podDeletion")
    try:
        return MIGPodDeletionSpec.from_dict(dict(raw) if isinstance(raw, Mapping) else {})
    except pydantic.ValidationError:
        return MIGPodDeletionSpec()  # the API server refuses such a policy; allow nothing


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
    """Pods the policy does not let go (no controller, emptyDir), pods no eviction can
    clear (a DaemonSet's, a static pod), and host processes."""
    held: tuple[PodView, ...] = ()
    """Free to go, but not evicted: a pod the policy does not let go refuses the node."""
    processes: tuple[GpuProcessEntry, ...] = ()
    """The compute processes the node agent still lists: the change waits for them."""

    @property
    def clear(self) -> bool:
        """Nothing left on the node's GPUs: the MIG manager may repartition them."""
        return not (self.evict or self.waiting or self.blocked or self.held or self.processes)

    @property
    def drain_refused(self) -> bool:
        """A pod the policy does not let go holds the whole node (drain's refusal)."""
        return any(isinstance(b, Blocker) and _refuses(b) for b in self.blocked)


def _refuses(blocker: Blocker) -> bool:
    """Blocked by the policy (force, deleteEmptyDir), not by what the pod is."""
    return not (blocker.pod.mirror or blocker.pod.daemonset)


def _owns_process(pod: PodView, processes: Sequence[GpuProcessEntry]) -> bool:
    return any(
        (e.pod_uid and e.pod_uid == pod.uid) or (e.pod and e.pod == pod.key) for e in processes
    )


def gpu_users(
    pods: Iterable[PodView], processes: Sequence[GpuProcessEntry] | None = None
) -> list[PodView]:
    """The pods that use the node's GPUs and have not finished: those requesting one, and
    (with the node agent's list) those owning a compute process."""
    listed = tuple(processes or ())
    if listed:
        pods = [replace(p, gpu=True) if not p.gpu and _owns_process(p, listed) else p for p in pods]
    return gpu_pods(pods)


def clearing(
    pods: Iterable[PodView],
    allowed: MIGPodDeletionSpec | None = None,
    recently_evicted: Iterable[str] = (),
    processes: Sequence[GpuProcessEntry] | None = None,
) -> Clearing:
    """The GPU pods to evict, wait for, or report. `allowed`: what the policy lets go
    beyond drain's rules (None: nothing). `recently_evicted` (pod UIDs) are not asked
    again while the cache has not yet shown them terminating. `processes`: the node
    agent's list of the node's compute processes, None when no agent runs."""
    allowed = allowed or MIGPodDeletionSpec()
    listed = tuple(processes or ())
    rules = PodDeletionSpec(force=allowed.force, delete_empty_dir=allowed.delete_empty_dir)
    plan = deletion_plan(gpu_users(pods, listed), rules, section=SECTION)
    host = tuple(HostProcess(e) for e in listed if not e.pod_uid and not e.pod)
    if any(_refuses(b) for b in plan.blocked):
        return Clearing((), plan.waiting, plan.blocked + host, plan.act, listed)
    asked = set(recently_evicted)
    evict = tuple(p for p in plan.act if p.uid not in asked)
    waiting = plan.waiting + tuple(p for p in plan.act if p.uid in asked)
    return Clearing(evict, waiting, plan.blocked + host, (), listed)


def refusal(pod: PodView, pdbs: Sequence[PdbView], server_message: str) -> Blocker:
    """Why an eviction of `pod` was refused, naming the budget when the cache knows it."""
    budget = disruption_blocker(pod, pdbs)
    if budget is not None:
        return Blocker(
            pod,
            f"PodDisruptionBudget {budget.namespace}/{budget.name} allows no disruption now",
        )
    return Blocker(pod, server_message or "eviction refused")


def blocked_message(
    config: str,
    blockers: Sequence[Blocker | HostProcess],
    limit: int = 3,
    *,
    refused: bool = False,
) -> str:
    """One sentence for the node's Event and the policy's condition ("" when nothing
    blocks). `refused`: a pod the policy does not let go holds the whole node."""
    if not blockers:
        return ""
    shown = "; ".join(str(b) for b in blockers[:limit])
    more = f" and {len(blockers) - limit} more" if len(blockers) > limit else ""
    what = "GPU pods" if all(isinstance(b, Blocker) for b in blockers) else "GPU users"
    held = "; no GPU pod is evicted while these block" if refused else ""
    return f"MIG change to {config} waits for {what} to leave: {shown}{more}{held}"


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
