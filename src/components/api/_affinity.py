"""Which nodes a workload's pods may land on: its nodeSelector and required node affinity.

The controllers ask it before deleting a driver DaemonSet (is every node it selects served
by another?), the upgrade asks it for a node without a driver pod (which DaemonSet will put
one there?). Both answer from cached objects, with the scheduler's semantics, so they must
agree with each other and with the scheduler: one implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
