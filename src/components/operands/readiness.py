"""Is a DaemonSet ready, and on which nodes is it not? (the reference's rules)

* the DaemonSet controller has not seen the newest spec (`observedGeneration <
  generation`, e.g. a DaemonSet just created, with no status yet): not ready;
* nothing to run (`desiredNumberScheduled == 0`): ready;
* any pod unavailable (`numberUnavailable > 0`): not ready;
* `RollingUpdate`: the controller has seen the newest spec (`observedGeneration >=
  generation`) and `updatedNumberScheduled == numberAvailable == desiredNumberScheduled`;
* `OnDelete` (the driver): every pod runs the newest revision (its
  `controller-revision-hash` label equals the newest ControllerRevision's hash), is
  `Running`, and all its containers are ready; and there is such a pod for every node
  the DaemonSet wants.

The nodes named as not ready are those of the DaemonSet's pods that are not ready (or, for
`OnDelete`, run an old revision). A node that should have a pod but has none cannot be
named from pods alone: then the answer is "not ready" with fewer names than missing pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler import generation_of, is_deleting, labels_of, name_of, owner_references_of, uid_of

REVISION_HASH_LABEL = "controller-revision-hash"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _owned_by(obj: Mapping[str, Any], owner_uid: str | None) -> bool:
    if not owner_uid:
        return True
    refs = owner_references_of(obj)
    return not refs or any(ref.get("uid") == owner_uid for ref in refs)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Running, not being deleted, and every container ready."""
    status = pod.get("status") or {}
    if is_deleting(pod) or status.get("phase") != "Running":
        return False
    containers = status.get("containerStatuses") or []
    if containers:
        return all(c.get("ready") is True for c in containers)
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def newest_revision_hash(
    ds: Mapping[str, Any], revisions: Sequence[Mapping[str, Any]]
) -> str | None:
    """The hash of the DaemonSet's newest ControllerRevision, or None if there is none."""
    uid = uid_of(ds)
    name = name_of(ds)
    owned = [r for r in revisions if _owned_by(r, uid)]
    if not owned:
        return None
    newest = max(owned, key=lambda r: _int(r.get("revision")))
    labelled = labels_of(newest).get(REVISION_HASH_LABEL)
    if labelled:
        return str(labelled)
    rev_name = name_of(newest)
    return rev_name.removeprefix(f"{name}-") if rev_name.startswith(f"{name}-") else None


def _node(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def _revision(pod: Mapping[str, Any]) -> str | None:
    value = labels_of(pod).get(REVISION_HASH_LABEL)
    return str(value) if value is not None else None


class DaemonSetPods:
    """What readiness reads of one DaemonSet's pods, kept as counts that a pod coming,
    changing or going updates in constant time: the nodes with a pod that is not ready,
    and the nodes running each revision. Judging a DaemonSet then costs what is not
    ready, not one look at every pod it has (a 5,000-node rollout judges eight
    DaemonSets many times a minute)."""

    __slots__ = ("_by_revision", "_unready", "pods")

    def __init__(self) -> None:
        self._unready: Counter[str] = Counter()
        self._by_revision: dict[str | None, Counter[str]] = {}
        self.pods = 0

    @classmethod
    def of(cls, pods: Iterable[Mapping[str, Any]]) -> DaemonSetPods:
        out = cls()
        for pod in pods:
            out.add(PodFacts.of(pod))
        return out

    def add(self, facts: PodFacts) -> None:
        self.pods += 1
        if not facts.ready:
            self._unready[facts.node] += 1
        self._by_revision.setdefault(facts.revision, Counter())[facts.node] += 1

    def remove(self, facts: PodFacts) -> None:
        self.pods -= 1
        if not facts.ready:
            _decrement(self._unready, facts.node)
        nodes = self._by_revision.get(facts.revision)
        if nodes is not None:
            _decrement(nodes, facts.node)
            if not nodes:
                del self._by_revision[facts.revision]

    def unready_nodes(self) -> set[str]:
        return set(self._unready)

    def stale_nodes(self, newest: str) -> set[str]:
        """Nodes with a pod of any other revision than `newest` (or of none)."""
        out: set[str] = set()
        for revision, nodes in self._by_revision.items():
            if revision != newest:
                out.update(nodes)
        return out

    def nodes_running(self, revision: str, excluding: set[str]) -> int:
        """How many nodes have a pod of `revision`, not counting those in `excluding`."""
        nodes = self._by_revision.get(revision)
        if not nodes:
            return 0
        return len(nodes) - sum(1 for node in excluding if node in nodes)


def _decrement(counts: Counter[str], key: str) -> None:
    left = counts[key] - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """The three things readiness reads of a pod."""

    node: str
    ready: bool
    revision: str | None

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodFacts:
        return cls(_node(pod), pod_ready(pod), _revision(pod))


def daemonset_ready(
    ds: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    revisions: Sequence[Mapping[str, Any]],
) -> tuple[bool, list[str]]:
    """(ready, sorted names of the nodes where it is not ready).

    `pods` are the DaemonSet's pods and `revisions` its ControllerRevisions; objects owned
    by another DaemonSet (by ownerReference uid) are ignored.
    """
    uid = uid_of(ds)
    return daemonset_pods_ready(
        ds, DaemonSetPods.of(p for p in pods if _owned_by(p, uid)), revisions
    )


def daemonset_pods_ready(
    ds: Mapping[str, Any],
    pods: DaemonSetPods | None,
    revisions: Sequence[Mapping[str, Any]],
) -> tuple[bool, list[str]]:
    """`daemonset_ready`, from the DaemonSet's pods already counted; `None` when its pods
    are not watched: then its counts alone judge it (`OnDelete` included, by
    `updatedNumberScheduled`), and no node is named."""
    spec = ds.get("spec") or {}
    status = ds.get("status") or {}

    if _int(status.get("observedGeneration")) < generation_of(ds):
        # The DaemonSet controller has not looked at this spec yet: a DaemonSet just
        # created (no status at all) or just changed says nothing about its pods.
        return False, []
    desired = _int(status.get("desiredNumberScheduled"))
    if desired == 0:
        return True, []

    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    unready = pods.unready_nodes() if pods is not None else set()
    ready = _int(status.get("numberUnavailable")) == 0

    if strategy == "OnDelete":
        if pods is not None and (newest := newest_revision_hash(ds, revisions)) is not None:
            unready |= pods.stale_nodes(newest)
            ready = ready and pods.nodes_running(newest, excluding=unready) >= desired
        else:
            # No pods counted, or no revision to compare with: trust the controller's count.
            ready = ready and _int(status.get("updatedNumberScheduled")) >= desired
    else:
        observed = _int(status.get("observedGeneration"))
        ready = (
            ready
            and observed >= generation_of(ds)
            and _int(status.get("updatedNumberScheduled"))
            == _int(status.get("numberAvailable"))
            == desired
        )
    unready.discard("")
    if unready:
        ready = False
    return ready, sorted(unready)
