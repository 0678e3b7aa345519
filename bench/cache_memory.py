"""Cache memory per Node at 5,000 nodes, offline (no API server).

Builds the informer's store exactly as a list would (JSON bytes -> decode, skipping the
dropped paths -> trim and intern -> store with the default indices and one label index)
and measures what stays allocated, with tracemalloc. Also reports the untrimmed figure
for comparison. Target: <= 8 KB per trimmed Node. `bench/list_sync.py` measures the same
against a real API server.
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish
from _nodes import NODE_DROP, gpu_node
from reconciler import by_label, by_owner_uid
from reconciler._decode import ObjectDecoder
from reconciler.lowlevel import DEFAULT_DROP, Store, Trimmer, by_namespace

NODES = 5000


def retained_per_node(payloads: list[bytes], trimmer: Trimmer | None) -> tuple[float, Store]:
    """Bytes kept per node after decoding as an informer does (skipping dropped paths)."""
    decoder = ObjectDecoder(trimmer.paths if trimmer else ())
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = Store(
        {
            "namespace": by_namespace,
            "owner": by_owner_uid,
            "label:nvidia.com/gpu.present": by_label("nvidia.com/gpu.present"),
        }
    )
    for payload in payloads:
        obj: dict[str, Any] = decoder.object(payload)
        store.upsert(trimmer(obj) if trimmer else obj)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / len(payloads), store


def main() -> None:
    payloads = [json.dumps(gpu_node(i)).encode() for i in range(NODES)]
    raw_json = sum(map(len, payloads)) / NODES
    full, keep_full = retained_per_node(payloads, None)
    del keep_full
    managed_only, keep_m = retained_per_node(payloads, Trimmer(intern=False))
    del keep_m
    images_only, keep_i = retained_per_node(payloads, Trimmer([("status", "images")]))
    del keep_i
    trimmed, store = retained_per_node(payloads, Trimmer(NODE_DROP))
    assert len(store) == NODES
    rows = [
        ("JSON per node as the server sends it", raw_json),
        ("cached as decoded, untrimmed", full),
        (f"minus the {len(DEFAULT_DROP)} default paths (managedFields...)", managed_only),
        ("... and status.images, strings interned", images_only),
        ("trimmed for a GPU operator (bench/_nodes.py NODE_DROP)", trimmed),
    ]
    print(f"{NODES} nodes, bytes retained per node:")
    for label, value in rows:
        print(f"  {label:<58} {value / 1024:6.1f} KiB")
    print(f"  cache total at {NODES} nodes, trimmed: {trimmed * NODES / 2**20:.1f} MiB")
    finish(
        "cache_memory",
        {
            "nodes": NODES,
            "json_bytes_per_node": round(raw_json),
            "untrimmed_bytes_per_node": round(full),
            "default_trim_no_intern_bytes_per_node": round(managed_only),
            "trim_images_interned_bytes_per_node": round(images_only),
            "trimmed_bytes_per_node": round(trimmed),
            "trimmed_total_mib": round(trimmed * NODES / 2**20, 1),
        },
    )


if __name__ == "__main__":
    main()
