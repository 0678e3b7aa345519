"""What one pod event costs the operator's pods informer before its handlers run, offline.

The pods informer sees every operand pod come, get scheduled, start and turn ready: about
35,000 events in a 1,000-node rollout. Each is decoded and trimmed to what the controllers
read (`components.controllers._informers`). Two ways, on the same watch events:

* **drop list**: decode while skipping the big top-level paths, then drop the rest of
  `POD_DROP` and keep only the Ready condition and the GPU containers (`pod_as_read`);
* **schema**: decode into `PodAsRead`, a TypedDict that names only what is read (msgspec
  skips the rest in C), then the same trim, which finds little left to do.

And the schema's way once more in two passes, the event's envelope first and its object
after, as every event was decoded before the decoder read both in one pass: the events are
written as the API server writes them (compact, `type` first), which the one pass expects.

The pods are the full sample ClusterPolicy's operand pods as the DaemonSet controller and
the kubelet make them (`bench/cache_memory.py`), each event a MODIFIED of a cached pod (the
trim reuses the cached copy's interned parts, as the informer does). Both ways must cache
equal objects; the bench checks that before it times them.

    .venv/bin/python bench/decode_pods.py [--pods 2000] [--rounds 5]

Prints figures as it goes; the last line is one JSON object (also
bench/results/decode_pods.json).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish
from cache_memory import daemonset_pod, operand_templates
from components.controllers._informers import POD_DROP, PodAsRead
from components.upgrade import pod_as_read
from reconciler import Object
from reconciler._decode import _EVENT, ObjectDecoder
from reconciler.lowlevel import Trimmer


def _events(count: int) -> list[bytes]:
    templates = operand_templates()
    return [
        json.dumps(
            {"type": "MODIFIED", "object": daemonset_pod(templates[i % len(templates)], i)},
            separators=(",", ":"),
        ).encode()
        for i in range(count)
    ]


def _way(schema: Any) -> tuple[ObjectDecoder, Trimmer]:
    trimmer = Trimmer(POD_DROP, pod_as_read, schema=schema)
    return ObjectDecoder(trimmer.decoder_paths, schema), trimmer


def _two_passes(decoder: ObjectDecoder) -> Callable[[bytes], tuple[str, Object]]:
    def event(line: bytes) -> tuple[str, Object]:
        envelope = _EVENT.decode(line)
        return envelope.type, decoder.object(envelope.object)

    return event


def _microseconds(events: list[bytes], schema: Any, rounds: int, *, two: bool = False) -> float:
    decoder, trimmer = _way(schema)
    decode = _two_passes(decoder) if two else decoder.event
    cached = [trimmer(decode(e)[1]) for e in events]
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        for event, previous in zip(events, cached, strict=True):
            trimmer(decode(event)[1], previous)
        best = min(best, time.perf_counter() - began)
    return best / len(events) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5, help="the best round counts")
    args = parser.parse_args()
    events = _events(args.pods)
    print(f"{len(events)} pod events, {sum(map(len, events)) // len(events)} bytes each")

    by_list, by_schema = _way(None), _way(PodAsRead)
    for event in events:
        kept = [trim(decoder.event(event)[1]) for decoder, trim in (by_list, by_schema)]
        if kept[0] != kept[1]:
            raise SystemExit(f"the two ways cache different pods:\n{kept[0]}\n{kept[1]}")
    print("both ways cache equal pods")

    drop_list = _microseconds(events, None, args.rounds)
    schema = _microseconds(events, PodAsRead, args.rounds)
    two_passes = _microseconds(events, PodAsRead, args.rounds, two=True)
    print(
        f"decode and trim per pod event: drop list {drop_list:.1f} us, schema {schema:.1f} us"
        f" (in two passes {two_passes:.1f} us)"
    )
    finish(
        "decode_pods",
        {
            "pods": len(events),
            "event_bytes": sum(map(len, events)) // len(events),
            "drop_list_us_per_event": round(drop_list, 1),
            "schema_us_per_event": round(schema, 1),
            "schema_share_of_drop_list": round(schema / drop_list, 2),
            "schema_in_two_passes_us_per_event": round(two_passes, 1),
        },
    )


if __name__ == "__main__":
    main()
