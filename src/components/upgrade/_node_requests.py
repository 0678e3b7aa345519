"""The node-by-node controllers' event mappings (the driver upgrade, the MIG-change
clearing, the remediation: one request per node), all from the cache, and a node as the
object of an Event.
"""

from __future__ import annotations

from collections.abc import Callable

from components.upgrade._names import NODE
from components.upgrade._reader import pod_node
from reconciler import Cache, Object, Request, label_index_name, name_of


def node_request(node: Object) -> tuple[Request, ...]:
    """A node's own event: its request."""
    return (Request("", name_of(node)),)


def nodes_labelled(cache: Cache, label: str, *values: str) -> list[Request]:
    """The nodes whose `label` has one of `values` (`label` indexed on the informer)."""
    index = label_index_name(label)
    return [Request("", name_of(n)) for v in values for n in cache.list(NODE, index=(index, v))]


def node_of_pod(cache: Cache, pod: Object, wanted: Callable[[Object], bool]) -> tuple[Request, ...]:
    """A pod's event: its node's request, when the node is `wanted` (being cleared)."""
    for name in pod_node(pod):
        node = cache.get(NODE, name)
        if node is not None and wanted(node):
            return (Request("", name),)
    return ()


def node_ref(name: str, uid: str) -> Object:
    """A node as an Event's object: its name and uid are all the Event needs."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": uid}}
