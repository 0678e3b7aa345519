"""Which nodes a DaemonSet's pods may land on, judged from the cache: pure functions.

A driver DaemonSet that is no longer desired is deleted only when every node it selects
is served by a desired one, so no node is ever left without a driver by a cleanup (the
reference deleted and recreated driver DaemonSets in a loop; DESIGN section 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler import Object, labels_of, name_of


def pod_spec(daemonset: Object) -> Mapping[str, Any]:
    spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec if isinstance(spec, Mapping) else {}


def _expression_matches(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key = str(expr.get("key", ""))
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        try:
            value, bound = int(labels[key]), int(values[0])
        except (KeyError, IndexError, ValueError):
            return False
        return value > bound if op == "Gt" else value < bound
    return False


def _term_matches(labels: Mapping[str, str], term: Mapping[str, Any]) -> bool:
    expressions: Sequence[Mapping[str, Any]] = term.get("matchExpressions") or ()
    return all(_expression_matches(labels, e) for e in expressions)


def selects(daemonset: Object, node: Object) -> bool:
    """Whether the DaemonSet's node selector and required node affinity admit the node."""
    spec = pod_spec(daemonset)
    labels = labels_of(node)
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms: Sequence[Mapping[str, Any]] = required.get("nodeSelectorTerms") or ()
    return not terms or any(_term_matches(labels, t) for t in terms)


def selected_nodes(daemonset: Object, nodes: Iterable[Object]) -> set[str]:
    return {name_of(n) for n in nodes if selects(daemonset, n)}


def nodes_only_served_by(
    stale: Object, desired: Iterable[Object], nodes: Sequence[Object]
) -> set[str]:
    """Nodes `stale` selects that no desired DaemonSet selects: deleting it would leave
    them without the operand."""
    remaining = selected_nodes(stale, nodes)
    for ds in desired:
        if not remaining:
            break
        remaining -= selected_nodes(ds, nodes)
    return remaining
