"""What the renderers see of the cluster, built from the cache."""

from __future__ import annotations

from collections.abc import Iterable

from components.controllers._labels import has_gpu, has_nfd_labels
from components.operands import GPUNode
from reconciler import Object, labels_of, name_of


def gpu_node(node: Object) -> GPUNode:
    return GPUNode.from_node(node)


def gpu_nodes(nodes: Iterable[Object]) -> list[GPUNode]:
    """Every node with a GPU, sorted by name (renderers skip the opted-out ones)."""
    return sorted((gpu_node(n) for n in nodes if has_gpu(labels_of(n))), key=lambda n: n.name)


def count_gpu_nodes(nodes: Iterable[Object]) -> int:
    """Every node with a GPU, opted out or not (the reference's gpu_nodes_total)."""
    return sum(1 for n in nodes if has_gpu(labels_of(n)))


def any_nfd_labels(nodes: Iterable[Object]) -> bool:
    return any(has_nfd_labels(labels_of(n)) for n in nodes)


def config_map_keys(config_maps: Iterable[Object]) -> dict[str, list[str]]:
    """ConfigMap name -> its data keys (the renderers mount named ConfigMaps key by key)."""
    return {
        name_of(cm): sorted([*(cm.get("data") or {}), *(cm.get("binaryData") or {})])
        for cm in config_maps
    }


def config_map_data(config_maps: Iterable[Object]) -> dict[str, dict[str, str]]:
    """ConfigMap name -> its data (the renderers that read a config's content)."""
    return {name_of(cm): dict(cm.get("data") or {}) for cm in config_maps}
