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

from collections.abc import Mapping, Sequence
from typing import Any

REVISION_HASH_LABEL = "controller-revision-hash"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _owned_by(obj: Mapping[str, Any], owner_uid: str | None) -> bool:
    if not owner_uid:
        return True
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return not refs or any(ref.get("uid") == owner_uid for ref in refs)


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """Running, not being deleted, and every container ready."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") != "Running":
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
    meta = ds.get("metadata") or {}
    uid = meta.get("uid")
    name = str(meta.get("name", ""))
    owned = [r for r in revisions if _owned_by(r, uid)]
    if not owned:
        return None
    newest = max(owned, key=lambda r: _int(r.get("revision")))
    rev_meta = newest.get("metadata") or {}
    labelled = (rev_meta.get("labels") or {}).get(REVISION_HASH_LABEL)
    if labelled:
        return str(labelled)
    rev_name = str(rev_meta.get("name", ""))
    return rev_name.removeprefix(f"{name}-") if rev_name.startswith(f"{name}-") else None


def _node(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def daemonset_ready(
    ds: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    revisions: Sequence[Mapping[str, Any]],
) -> tuple[bool, list[str]]:
    """(ready, sorted names of the nodes where it is not ready).

    `pods` are the DaemonSet's pods and `revisions` its ControllerRevisions; objects owned
    by another DaemonSet (by ownerReference uid) are ignored.
    """
    meta = ds.get("metadata") or {}
    spec = ds.get("spec") or {}
    status = ds.get("status") or {}
    uid = meta.get("uid")
    own_pods = [p for p in pods if _owned_by(p, uid)]

    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        # The DaemonSet controller has not looked at this spec yet: a DaemonSet just
        # created (no status at all) or just changed says nothing about its pods.
        return False, []
    desired = _int(status.get("desiredNumberScheduled"))
    if desired == 0:
        return True, []

    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    unready = {_node(p) for p in own_pods if not pod_ready(p)}
    ready = _int(status.get("numberUnavailable")) == 0

    if strategy == "OnDelete":
        newest = newest_revision_hash(ds, revisions)
        if newest is None:
            # No revision to compare with: trust the controller's own count.
            ready = ready and _int(status.get("updatedNumberScheduled")) >= desired
        else:
            stale = {
                _node(p)
                for p in own_pods
                if (p.get("metadata") or {}).get("labels", {}).get(REVISION_HASH_LABEL) != newest
            }
            unready |= stale
            current = [p for p in own_pods if _node(p) not in unready]
            ready = ready and len({_node(p) for p in current}) >= desired
    else:
        observed = _int(status.get("observedGeneration"))
        ready = (
            ready
            and observed >= _int(meta.get("generation"))
            and _int(status.get("updatedNumberScheduled"))
            == _int(status.get("numberAvailable"))
            == desired
        )
    unready.discard("")
    if unready:
        ready = False
    return ready, sorted(unready)
