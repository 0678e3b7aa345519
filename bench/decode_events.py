"""What one watch event costs the operator's pods, nodes and DaemonSets informers before
their handlers run, offline.

Every operand pod comes, gets scheduled, starts and turns ready, every GPU node changes
about four times, and the DaemonSets' counts change about 2,250 times in a 1,000-node
rollout. Each event is decoded and trimmed to what the controllers read
(`components.controllers._cached_shapes`). Two ways, on the same events:

* **drop list**: decode while skipping the big top-level paths, then drop the rest of the
  kind's drop list (`POD_DROP`, `NODE_DROP`, for DaemonSets `managedFields` alone; for pods
  then `pod_as_read`);
* **schema**: decode into a TypedDict that names only what is read (`PodAsRead`,
  `NodeAsRead`, `DaemonSetAsRead`; msgspec skips the rest in C), then the same trim, which
  finds little left.

And the schema's way once more in two passes, the event's envelope first and its object
after, as every event was decoded before the decoder read both in one pass. The events are
written as the API server writes them (compact, `type` first), which the one pass expects.

The pods are the full sample ClusterPolicy's operand pods as the DaemonSet controller and
the kubelet make them (`bench/cache_memory.py`), the nodes a kubelet's GPU nodes with NFD's
labels (`bench/_nodes.py`), the DaemonSets that policy's with our apply's and the DaemonSet
controller's managedFields; each event a MODIFIED of a cached object (the trim reuses the
cached copy's interned parts, as the informer does). Both ways must cache equal objects;
the bench checks that before it times them.

    .venv/bin/python bench/decode_events.py [--objects 2000] [--rounds 5]

Prints figures as it goes; the last line is one JSON object (also
bench/results/decode_events.json).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish
from _nodes import gpu_node
from cache_memory import daemonset_pod, operand_daemonsets, operand_templates
from components.controllers._cached_shapes import (
    NODE_DROP,
    POD_DROP,
    DaemonSetAsRead,
    NodeAsRead,
    PodAsRead,
)
from components.upgrade import pod_as_read
from reconciler import Object
from reconciler._decode import _EVENT, ObjectDecoder
from reconciler.lowlevel import Trimmer


@dataclass(frozen=True)
class Kind:
    name: str
    drop: Sequence[Sequence[str]]
    transform: Callable[[Object], Object] | None
    schema: Any
    build: Callable[[int], Object]


def _operand_pod() -> Callable[[int], Object]:
    templates = operand_templates()
    return lambda i: daemonset_pod(templates[i % len(templates)], i)


def _fields_of(value: Any) -> Any:
    """`value`'s field set as a managedFields entry writes it (`f:` keys, `{}` leaves)."""
    if isinstance(value, dict):
        return {f"f:{k}": _fields_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return {
            f'k:{{"name":"{v.get("name", i)}"}}': _fields_of(v)
            for i, v in enumerate(value)
            if isinstance(v, dict)
        }
    return {}


def _operand_daemonset() -> Callable[[int], Object]:
    """The sample policy's DaemonSets as the API server sends them mid-rollout: our apply's
    and the DaemonSet controller's managedFields, and counts that move."""
    rendered = operand_daemonsets()

    def build(i: int) -> Object:
        ds = copy.deepcopy(rendered[i % len(rendered)])
        meta = ds["metadata"]
        meta.update(uid=f"uid-{i % len(rendered)}", resourceVersion=str(5000 + i), generation=1)
        meta["managedFields"] = [
            {
                "manager": "gpu-operator",
                "operation": "Apply",
                "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields_of(
                    {"metadata": {"labels": meta.get("labels", {})}, "spec": ds["spec"]}
                ),
            },
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "subresource": "status",
                "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:currentNumberScheduled": {}, "f:numberReady": {}}},
            },
        ]
        ds["status"] = {
            "observedGeneration": 1,
            "desiredNumberScheduled": 1000,
            "currentNumberScheduled": 1000,
            "updatedNumberScheduled": 1000,
            "numberReady": i % 1000,
            "numberAvailable": i % 1000,
            "numberUnavailable": 1000 - i % 1000,
        }
        return ds

    return build


def _events(kind: Kind, count: int) -> list[bytes]:
    return [
        json.dumps({"type": "MODIFIED", "object": kind.build(i)}, separators=(",", ":")).encode()
        for i in range(count)
    ]


def _way(kind: Kind, schema: Any) -> tuple[ObjectDecoder, Trimmer]:
    trimmer = Trimmer(kind.drop, kind.transform, schema=schema)
    return ObjectDecoder(trimmer.decoder_paths, schema), trimmer


def _two_passes(decoder: ObjectDecoder) -> Callable[[bytes], tuple[str, Object]]:
    def event(line: bytes) -> tuple[str, Object]:
        envelope = _EVENT.decode(line)
        return envelope.type, decoder.object(envelope.object)

    return event


def _microseconds(
    kind: Kind, events: list[bytes], schema: Any, rounds: int, *, two: bool = False
) -> float:
    decoder, trimmer = _way(kind, schema)
    decode = _two_passes(decoder) if two else decoder.event
    cached = [trimmer(decode(e)[1]) for e in events]
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        for event, previous in zip(events, cached, strict=True):
            trimmer(decode(event)[1], previous)
        best = min(best, time.perf_counter() - began)
    return best / len(events) * 1e6


def _measure(kind: Kind, count: int, rounds: int) -> dict[str, Any]:
    events = _events(kind, count)
    size = sum(map(len, events)) // len(events)
    print(f"{len(events)} {kind.name} events, {size} bytes each")
    by_list, by_schema = _way(kind, None), _way(kind, kind.schema)
    for event in events:
        kept = [trim(decoder.event(event)[1]) for decoder, trim in (by_list, by_schema)]
        if kept[0] != kept[1]:
            raise SystemExit(f"the two ways cache different {kind.name}:\n{kept[0]}\n{kept[1]}")
    print(f"both ways cache equal {kind.name}")
    drop_list = _microseconds(kind, events, None, rounds)
    schema = _microseconds(kind, events, kind.schema, rounds)
    two_passes = _microseconds(kind, events, kind.schema, rounds, two=True)
    print(
        f"decode and trim per {kind.name} event: drop list {drop_list:.1f} us, schema"
        f" {schema:.1f} us (in two passes {two_passes:.1f} us)"
    )
    return {
        "events": len(events),
        "event_bytes": size,
        "drop_list_us_per_event": round(drop_list, 1),
        "schema_us_per_event": round(schema, 1),
        "schema_share_of_drop_list": round(schema / drop_list, 2),
        "schema_in_two_passes_us_per_event": round(two_passes, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000, help="events of each kind")
    parser.add_argument("--rounds", type=int, default=5, help="the best round counts")
    args = parser.parse_args()
    kinds = (
        Kind("pods", POD_DROP, pod_as_read, PodAsRead, _operand_pod()),
        Kind("nodes", NODE_DROP, None, NodeAsRead, gpu_node),
        Kind("daemonsets", (), None, DaemonSetAsRead, _operand_daemonset()),
    )
    finish("decode_events", {k.name: _measure(k, args.objects, args.rounds) for k in kinds})


if __name__ == "__main__":
    main()
