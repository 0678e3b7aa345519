"""Which nodes a workload's pods may land on: its nodeSelector and required node affinity,
and for a DaemonSet the node's taints.

The controllers ask it before deleting a driver DaemonSet (is every node it selects served
by another?), the upgrade asks it for a node without a driver pod (which DaemonSet will put
one there?), readiness asks it whether a DaemonSet that counts no node should count one.
All answer from cached objects, with the scheduler's and the DaemonSet controller's
semantics, so they must agree with each other and with them: one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

Labels = Mapping[str, str]


def template_pod_spec(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    """`spec.template.spec` of a DaemonSet (or any workload), empty when missing."""
    spec = ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec if isinstance(spec, Mapping) else {}


def _node_requirement(expr: Mapping[str, Any], labels: Labels) -> bool:
    key = str(expr.get("key", ""))
    op = expr.get("operator")
    vals = [str(v) for v in expr.get("values") or []]
    value = labels.get(key)
    if op == "In":
        return value in vals
    if op == "NotIn":
        return value not in vals
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(vals) == 1:
        try:
            have, bound = int(value), int(vals[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_selector_terms_match(terms: Sequence[Mapping[str, Any]], labels: Labels) -> bool:
    """`nodeSelectorTerms`: any term matches when all its label expressions do (field
    expressions are not evaluated: they name nodes, which our DaemonSets never do)."""
    return any(
        all(_node_requirement(e, labels) for e in term.get("matchExpressions") or [])
        for term in terms
    )


def pod_spec_targets(pod_spec: Mapping[str, Any], labels: Labels) -> bool:
    """Whether a pod spec's nodeSelector and required node affinity admit a node."""
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    return not required or node_selector_terms_match(required, labels)


DAEMON_POD_TOLERATIONS: Final[tuple[Mapping[str, str], ...]] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
"""The tolerations the DaemonSet controller gives every pod it makes, whatever the template
says: a cordoned or not-ready node still gets its DaemonSet pods."""
HOST_NETWORK_TOLERATION: Final[Mapping[str, str]] = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}
"""Added as well to a DaemonSet pod on the host network."""

_REPELLING = frozenset({"NoSchedule", "NoExecute"})
"""The taint effects that keep a DaemonSet's pod off a node (PreferNoSchedule does not)."""


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """The API's rule: an empty effect or key in the toleration matches any; `Exists`
    ignores the value, `Equal` (the default) compares it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def daemon_pod_runs_on(
    pod_spec: Mapping[str, Any], labels: Labels, taints: Sequence[Mapping[str, Any]]
) -> bool:
    """Whether the DaemonSet controller wants a pod of this template on a node with these
    labels and taints (`spec.taints`): its selector and affinity admit the node, and the
    pod tolerates every NoSchedule and NoExecute taint there."""
    if not pod_spec_targets(pod_spec, labels):
        return False
    tolerations = [*(pod_spec.get("tolerations") or ()), *DAEMON_POD_TOLERATIONS]
    if pod_spec.get("hostNetwork"):
        tolerations.append(HOST_NETWORK_TOLERATION)
    return all(
        any(tolerates(t, taint) for t in tolerations)
        for taint in taints
        if taint.get("effect") in _REPELLING
    )
