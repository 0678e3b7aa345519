"""Which nodes a DaemonSet's pods may land on, judged from the cache: pure functions.

A driver DaemonSet that is no longer desired is deleted only when every node it selects
is served by a desired one, so no node is ever left without a driver by a cleanup (the
reference deleted and recreated driver DaemonSets in a loop).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from components.api import pod_spec_targets, template_pod_spec
from reconciler import Object, labels_of, name_of


def selects(daemonset: Object, node: Object) -> bool:
    """Whether the DaemonSet's node selector and required node affinity admit the node."""
    return pod_spec_targets(template_pod_spec(daemonset), labels_of(node))


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
