"""Event-to-reconcile latency against a real kube-apiserver, idle and under churn.

1,000 ConfigMaps are watched by one controller (4 workers) whose reconcile reads the
cache. Two latencies are measured for each change:

- event -> reconcile: from the informer receiving the watch event to a reconcile of that
  object starting (the engine's own share: handlers, queue, worker pickup);
- write -> reconcile: from sending the PATCH to that reconcile starting (adds the API
  server's write and watch delivery).

"idle" changes one object at a time, waiting for its reconcile (an idle queue); "churn"
patches all 1,000 objects three times over with 50 writes in flight. Target: event ->
reconcile p99 <= 20 ms on an idle queue.
"""

from __future__ import annotations

import asyncio
import bisect
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubernetes_asyncio import client, config

from _common import configmap, finish, percentile
from reconciler import GVK, Manager, Object, Request, Result
from reconciler.envtest import ControlPlane

OBJECTS = 1000
IDLE_SAMPLES = 300
CHURN_ROUNDS = 3
IN_FLIGHT = 50
NS = "bench"
CONFIGMAP = GVK("", "v1", "ConfigMap")


class EventClock:
    """An informer handler that notes when each (name, resourceVersion) arrived."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, str], float] = {}

    def on_add(self, obj: Object) -> None:
        self._note(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self._note(new)

    def on_delete(self, obj: Object) -> None:
        pass

    def _note(self, obj: Object) -> None:
        meta = obj["metadata"]
        self.at.setdefault((meta["name"], meta["resourceVersion"]), time.perf_counter())


def ms(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "samples": len(values),
    }


async def main(plane: ControlPlane) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        mgr = Manager(api, field_manager="bench", bind_address=None)
        c = mgr.client
        await c.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        limit = asyncio.Semaphore(IN_FLIGHT)

        async def put(name: str, value: str) -> tuple[float, Object]:
            async with limit:
                sent = time.perf_counter()
                out = await c.patch(CONFIGMAP, name, {"data": {"v": value}}, namespace=NS)
                return sent, out

        async def create(i: int) -> None:
            async with limit:
                await c.create(configmap(f"cm-{i:04d}", NS, v="0"))

        await asyncio.gather(*(create(i) for i in range(OBJECTS)))

        informer = mgr.informer(CONFIGMAP, namespace=NS)
        clock = EventClock()
        informer.add_handler(clock)  # before the controller's handler: it runs first
        starts: dict[str, list[float]] = defaultdict(list)
        seen_rv: dict[str, int] = {}
        progress = asyncio.Event()

        async def reconcile(request: Request) -> Result | None:
            now = time.perf_counter()
            obj = mgr.client.get(CONFIGMAP, request.name, request.namespace)
            starts[request.name].append(now)
            if obj is not None:
                seen_rv[request.name] = int(obj["metadata"]["resourceVersion"])
            progress.set()
            return None

        mgr.controller("bench", reconcile, max_concurrent_reconciles=4).watch(informer)
        task = asyncio.create_task(mgr.run())
        while len(seen_rv) < OBJECTS:
            progress.clear()
            await asyncio.wait_for(progress.wait(), 60)

        # Quiet logging from here on: one INFO line per write would dominate the timing.
        import logging

        logging.getLogger("reconciler").setLevel(logging.WARNING)

        idle_event: list[float] = []
        idle_write: list[float] = []
        for i in range(IDLE_SAMPLES):
            name = f"cm-{i % OBJECTS:04d}"
            sent, out = await put(name, f"idle-{i}")
            rv = out["metadata"]["resourceVersion"]
            while seen_rv.get(name, 0) < int(rv):
                progress.clear()
                await asyncio.wait_for(progress.wait(), 60)
            began = next(t for t in starts[name] if t >= sent)
            idle_write.append(began - sent)
            idle_event.append(began - clock.at[(name, rv)])

        writes: list[tuple[str, str, float]] = []

        async def churn_one(name: str, value: str) -> None:
            sent, out = await put(name, value)
            writes.append((name, out["metadata"]["resourceVersion"], sent))

        churn_began = time.perf_counter()
        await asyncio.gather(
            *(
                churn_one(f"cm-{i:04d}", f"churn-{r}")
                for r in range(CHURN_ROUNDS)
                for i in range(OBJECTS)
            )
        )
        churn_writes_s = len(writes) / (time.perf_counter() - churn_began)
        last = {name: int(rv) for name, rv, _ in writes}
        while any(seen_rv.get(n, 0) < rv for n, rv in last.items()):
            progress.clear()
            await asyncio.wait_for(progress.wait(), 60)
        churn_event: list[float] = []
        churn_write: list[float] = []
        for name, rv, sent in writes:
            runs = sorted(starts[name])
            event_at = clock.at.get((name, rv))
            if event_at is None:
                continue  # collapsed by the server into a later event (rare)
            began = runs[bisect.bisect_left(runs, event_at)]
            churn_event.append(began - event_at)
            churn_write.append(began - sent)

        mgr.stop()
        await task

    figures: dict[str, Any] = {
        "objects": OBJECTS,
        "idle_event_to_reconcile": ms(idle_event),
        "idle_write_to_reconcile": ms(idle_write),
        "churn_event_to_reconcile": ms(churn_event),
        "churn_write_to_reconcile": ms(churn_write),
        "churn_writes_per_s": round(churn_writes_s),
        "workers": 4,
    }
    for key, value in figures.items():
        print(f"{key:>28}: {value}")
    finish("event_latency", figures)


if __name__ == "__main__":
    with ControlPlane() as control_plane:
        asyncio.run(main(control_plane))
