"""Listing and syncing 5,000 Nodes from a real kube-apiserver, and the cache they take.

Starts a throwaway control plane (reconciler.envtest), creates 5,000 realistic GPU nodes
(bench/_nodes.py), then times a fresh informer from start to synced: the list
(resourceVersion=0, from the apiserver's watch cache), decoding, trimming and indexing.
A second sync runs under tracemalloc to measure what the cache keeps per node.
Targets: <= 5 s to list and sync 5,000 nodes; <= 8 KB per trimmed Node.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubernetes_asyncio import client, config

from _common import finish
from _nodes import NODE_DROP, gpu_node
from reconciler import GVK, Cache, label_index_name
from reconciler.envtest import ControlPlane
from reconciler.lowlevel import RESTMapper, Transport

NODES = 5000
NODE = GVK("", "v1", "Node")
RUNS = 3


async def create_nodes(transport: Transport) -> None:
    limit = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        body = gpu_node(i)
        meta = body["metadata"]
        for key in ("managedFields", "uid", "resourceVersion", "creationTimestamp"):
            meta.pop(key, None)
        async with limit:
            await transport.request("POST", "/api/v1/nodes", body=body)

    await asyncio.gather(*(create(i) for i in range(NODES)))


async def sync_once(api: Any) -> tuple[float, Cache]:
    transport = Transport(api)
    cache = Cache(transport, RESTMapper(transport))
    cache.informer(NODE, drop=NODE_DROP, index_labels=["nvidia.com/gpu.present"])
    began = time.perf_counter()
    await cache.start()
    await cache.wait_for_sync(120)
    elapsed = time.perf_counter() - began
    await cache.stop()
    return elapsed, cache


async def main(plane: ControlPlane) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        transport = Transport(api)
        began = time.perf_counter()
        await create_nodes(transport)
        print(f"created {NODES} nodes in {time.perf_counter() - began:.1f}s")

        # resourceVersion=0 is answered from the watch cache, which may trail etcd a moment.
        while True:
            began = time.perf_counter()
            raw = await transport.request("GET", "/api/v1/nodes", params={"resourceVersion": "0"})
            list_only = time.perf_counter() - began
            if len(raw["items"]) == NODES:
                break
            print(f"watch cache has {len(raw['items'])} nodes so far")
            await asyncio.sleep(1)
        sample = raw["items"][0]
        assert sample["status"].get("nodeInfo"), "node status was stored"
        del raw, sample

        times = []
        for _ in range(RUNS):
            elapsed, cache = await sync_once(api)
            assert len(cache.informer_for(NODE).store) == NODES
            times.append(elapsed)
            print(f"list + sync of {NODES} nodes: {elapsed:.2f}s")
        del cache

        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        mem_transport = Transport(api)
        mem_cache = Cache(mem_transport, RESTMapper(mem_transport))
        mem_cache.informer(NODE, drop=NODE_DROP, index_labels=["nvidia.com/gpu.present"])
        await mem_cache.start()
        await mem_cache.wait_for_sync(120)
        await mem_cache.stop()
        gc.collect()
        per_node = (tracemalloc.get_traced_memory()[0] - base) / NODES
        tracemalloc.stop()
        gpu = mem_cache.list(NODE, labels={"nvidia.com/gpu.present": "true"})
        assert len(gpu) == NODES
        assert (
            label_index_name("nvidia.com/gpu.present")
            in mem_cache.informer_for(NODE).store.index_names
        )
        print(f"GET of the list alone (decode included): {list_only:.2f}s")
        print(f"cache retained per node: {per_node / 1024:.1f} KiB")

    finish(
        "list_sync",
        {
            "nodes": NODES,
            "list_and_sync_seconds_min": round(min(times), 3),
            "list_and_sync_seconds_median": round(statistics.median(times), 3),
            "list_get_and_decode_seconds": round(list_only, 3),
            "cache_bytes_per_node": round(per_node),
            "apiserver": plane.version(),
        },
    )


if __name__ == "__main__":
    with ControlPlane() as control_plane:
        asyncio.run(main(control_plane))
