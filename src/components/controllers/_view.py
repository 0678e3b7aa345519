"""What the renderers see of the cluster, built from the cache."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping

from components.controllers._labels import has_gpu, has_nfd_labels
from components.operands import ConfigDocument, GPUNode, read_config
from reconciler import Object, labels_of, name_of, resource_version_of, uid_of


def gpu_node(node: Object) -> GPUNode:
    return GPUNode.from_node(node)


def gpu_nodes(nodes: Iterable[Object], views: GpuNodeViews | None = None) -> list[GPUNode]:
    """Every node with a GPU, sorted by name (renderers skip the opted-out ones)."""
    return views_of_gpu_nodes((n for n in nodes if has_gpu(labels_of(n))), views)


def views_of_gpu_nodes(
    gpu_nodes: Iterable[Object], views: GpuNodeViews | None = None
) -> list[GPUNode]:
    """`gpu_nodes` (known to have a GPU: the node cache's GPU index) as views, by name."""
    view = views.view if views is not None else gpu_node
    out = sorted((view(n) for n in gpu_nodes), key=lambda n: n.name)
    if views is not None:
        views.keep_only(n.name for n in out)
    return out


class GpuNodeViews:
    """Each node's `GPUNode`, kept while the node is unchanged (same resourceVersion): the
    view is built for every reconcile, and most nodes did not change since the last.

    One view per node name, the latest: a view holds a copy of its node's labels, so a view
    kept per resourceVersion kept every superseded copy alive too (a 5,000-node rollout
    changes each node about ten times)."""

    def __init__(self) -> None:
        self._views: dict[str, tuple[str, GPUNode]] = {}

    def view(self, node: Object) -> GPUNode:
        version = resource_version_of(node)
        if not version:
            return gpu_node(node)
        name = name_of(node)
        found = self._views.get(name)
        if found is not None and found[0] == version:
            return found[1]
        view = gpu_node(node)
        self._views[name] = (version, view)
        return view

    def keep_only(self, names: Iterable[str]) -> None:
        """Forget the views of nodes not in `names` (deleted, or no GPU any more)."""
        wanted = set(names)
        if len(wanted) < len(self._views):
            self._views = {k: v for k, v in self._views.items() if k in wanted}


def any_nfd_labels(nodes: Iterable[Object]) -> bool:
    return any(has_nfd_labels(labels_of(n)) for n in nodes)


def config_map_keys(config_maps: Iterable[Object]) -> dict[str, list[str]]:
    """ConfigMap name -> its data keys (the renderers mount named ConfigMaps key by key)."""
    return {
        name_of(cm): sorted([*(cm.get("data") or {}), *(cm.get("binaryData") or {})])
        for cm in config_maps
    }


class ConfigDocuments:
    """The ConfigMaps whose content the renderers read (`Operand.config_maps_read`), each
    key read (`read`) once per version of its ConfigMap (uid and resourceVersion): the view
    is built for every reconcile, and a user's ConfigMap rarely changes. A ConfigMap's
    reading runs in a worker thread, so even the largest config (1 MiB of keys of
    `MAX_CONFIG_BYTES`) leaves the event loop to the leader election's renewals and the
    other controllers. Only the ConfigMaps read now are kept."""

    def __init__(self, read: Callable[[str], ConfigDocument] = read_config) -> None:
        self.read = read
        self._kept: dict[str, tuple[tuple[str, str], dict[str, ConfigDocument]]] = {}

    async def documents(
        self, config_maps: Iterable[Object], names: Collection[str]
    ) -> dict[str, dict[str, ConfigDocument]]:
        """ConfigMap name -> key -> what it holds, for the ConfigMaps named in `names`."""
        kept: dict[str, tuple[tuple[str, str], dict[str, ConfigDocument]]] = {}
        for cm in config_maps:
            name = name_of(cm)
            if name not in names:
                continue
            version = (uid_of(cm), resource_version_of(cm))
            found = self._kept.get(name)
            if found is not None and found[0] == version and version[1]:
                kept[name] = found
                continue
            data = dict(cm.get("data") or {})
            kept[name] = (version, await asyncio.to_thread(self._read_all, data))
        self._kept = kept
        return {name: documents for name, (_, documents) in kept.items()}

    def _read_all(self, data: Mapping[str, str]) -> dict[str, ConfigDocument]:
        return {key: self.read(str(text)) for key, text in data.items()}
