"""Clearing a node before its driver is replaced: which pods, how, and what stands in the way.

Pure decisions over the pods cached on one node; the controller carries them out and the
next event (a pod gone, a PodDisruptionBudget that allows a disruption again) moves on.

* **GPU pods** request a resource named `nvidia.com/gpu*` or `nvidia.com/mig-*`; they hold
  the driver open, so none may run while it is replaced.
* **waitForCompletion** waits for the pods matching its selector (jobs) to finish.
* **podDeletion** deletes the GPU pods. Like `kubectl drain`'s rules, a pod without a
  controller needs `force`, one with emptyDir data needs `deleteEmptyDir`; a mirror pod or a
  DaemonSet's pod cannot be cleared (it would be recreated on the spot). Any such pod sends
  the node to drain (when enabled) or to upgrade-failed.
* **drain** evicts (Eviction API: PodDisruptionBudgets hold) every pod matching its selector
  except DaemonSet pods, mirror pods, pods labelled `nvidia.com/gpu-driver-upgrade-drain.skip
  =true`, and the operator's own pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from components.api import DrainSpec, PodDeletionSpec, names_and_more
from components.upgrade._model import PdbView
from components.upgrade._names import DRAIN_SKIP_LABEL
from components.upgrade._pods import PodView
from components.upgrade._selectors import label_selector_matches, parse_selector


@dataclass(frozen=True, slots=True)
class Blocker:
    pod: PodView
    reason: str

    def __str__(self) -> str:
        return f"{self.pod.key} ({self.reason})"


@dataclass(frozen=True, slots=True)
class ClearPlan:
    """What clearing a node takes now."""

    act: tuple[PodView, ...] = ()
    """Pods to delete (or evict) now."""
    waiting: tuple[PodView, ...] = ()
    """Pods already terminating: wait for them to go."""
    blocked: tuple[Blocker, ...] = ()
    """Pods the policy does not allow to clear."""

    @property
    def clear(self) -> bool:
        return not (self.act or self.waiting or self.blocked)

    @property
    def remaining(self) -> tuple[PodView, ...]:
        return self.act + self.waiting


def gpu_pods(pods: Iterable[PodView]) -> list[PodView]:
    """Pods that use a GPU and have not finished."""
    return [p for p in pods if p.gpu and p.active]


def _static_blocker(pod: PodView, *, force: bool, empty_dir: bool, section: str) -> str | None:
    if not pod.managed and not force:
        return f"not managed by a controller; set {section}.force to remove it"
    if (pod.local_storage or not pod.volumes_known) and not empty_dir:
        # Volumes not known (trimmed from the cache and not read yet) count as emptyDir:
        # losing data nobody agreed to lose is the one mistake we cannot undo.
        return f"uses emptyDir, whose data would be lost; set {section}.deleteEmptyDir"
    return None


def deletion_plan(
    pods: Iterable[PodView], spec: PodDeletionSpec, *, section: str = "podDeletion"
) -> ClearPlan:
    """`section`: where the admin sets `force` and `deleteEmptyDir`, for the reasons."""
    act: list[PodView] = []
    waiting: list[PodView] = []
    blocked: list[Blocker] = []
    for pod in gpu_pods(pods):
        if pod.terminating:
            waiting.append(pod)
        elif pod.mirror:
            blocked.append(Blocker(pod, "a static pod: the API cannot delete it"))
        elif pod.daemonset:
            blocked.append(Blocker(pod, f"DaemonSet {pod.owner_name} would recreate it"))
        elif reason := _static_blocker(
            pod, force=spec.force, empty_dir=spec.delete_empty_dir, section=section
        ):
            blocked.append(Blocker(pod, reason))
        else:
            act.append(pod)
    return ClearPlan(tuple(act), tuple(waiting), tuple(blocked))


def drain_plan(
    pods: Iterable[PodView],
    spec: DrainSpec,
    *,
    operator_pod: tuple[str, str] | None = None,
) -> ClearPlan:
    """Raises `SelectorError` for a podSelector that does not parse."""
    selector = parse_selector(spec.pod_selector)
    act: list[PodView] = []
    waiting: list[PodView] = []
    blocked: list[Blocker] = []
    for pod in pods:
        if not pod.active or pod.daemonset or pod.mirror:
            continue
        if pod.labels.get(DRAIN_SKIP_LABEL) == "true":
            continue
        if operator_pod is not None and (pod.namespace, pod.name) == operator_pod:
            continue
        if not selector(pod.labels):
            continue
        if pod.terminating:
            waiting.append(pod)
        elif reason := _static_blocker(
            pod, force=spec.force, empty_dir=spec.delete_empty_dir, section="drain"
        ):
            blocked.append(Blocker(pod, reason))
        else:
            act.append(pod)
    return ClearPlan(tuple(act), tuple(waiting), tuple(blocked))


def jobs_running(pods: Iterable[PodView], selector_text: str) -> list[PodView]:
    """Pods matching waitForCompletion's selector that are still Running or Pending."""
    selector = parse_selector(selector_text)
    return [p for p in pods if p.phase in ("Running", "Pending") and selector(p.labels)]


def disruption_blocker(pod: PodView, pdbs: Sequence[PdbView]) -> PdbView | None:
    """A PodDisruptionBudget that would refuse evicting `pod` now (None: eviction would
    pass, as far as the cached budgets say)."""
    matching = [
        b
        for b in pdbs
        if b.namespace == pod.namespace and label_selector_matches(b.selector, pod.labels)
    ]
    if len(matching) > 1:
        return matching[0]  # the API refuses to evict a pod covered by several budgets
    return next((b for b in matching if b.disruptions_allowed <= 0), None)


def describe(pods: Sequence[PodView], limit: int = 3) -> str:
    """`ns/a, ns/b and 3 more`."""
    return names_and_more([p.key for p in pods], limit)
