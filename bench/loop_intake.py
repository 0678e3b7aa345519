"""What a watch stream costs one informer process on each event loop, against a real apiserver.

The operator's commonest work is taking in watch events: a TLS read, a decode, a trim and
the dispatch to handlers, tens of thousands of times in a 1,000-node rollout. Whole-rollout
runs (`scale.py`) vary by more than the loop could change, so this bench isolates it: a
throwaway control plane (`reconciler.envtest`) holds `--objects` ConfigMaps of ~3.4 KB; a
separate consumer process (an informer on the engine's `Cache`, as the operator has) syncs
them, then takes `--rounds` updates of each while this process writes them. The consumer
reports its own CPU seconds from synced to the last event, so the writer, the apiserver
and etcd are not counted. Consumers on asyncio's loop and on uvloop alternate,
`--repeats` times each; printed and in the JSON: each run and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubernetes_asyncio import client, config

from _common import configmap, finish
from reconciler import GVK, Cache, Manager, Object
from reconciler.envtest import ControlPlane
from reconciler.lowlevel import RESTMapper, Transport

CONFIGMAP = GVK("", "v1", "ConfigMap")
NS = "intake"
IN_FLIGHT = 50
LOOPS = ("asyncio", "uvloop")


class _Counter:
    """Counts update events; sets `done` at `expected`."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0
        self.done = asyncio.Event()

    def on_add(self, obj: Object) -> None:
        pass

    def on_update(self, old: Object, new: Object) -> None:
        self.seen += 1
        if self.seen >= self.expected:
            self.done.set()

    def on_delete(self, obj: Object) -> None:
        pass


async def consume(kubeconfig: str, expected: int) -> None:
    """The consumer process: sync, say `ready`, then print its CPU seconds for the stream."""
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        transport = Transport(api)
        cache = Cache(transport, RESTMapper(transport))
        counter = _Counter(expected)
        cache.informer(CONFIGMAP, namespace=NS).add_handler(counter)
        await cache.start()
        await cache.wait_for_sync(60)
        began = time.process_time()
        print("ready", flush=True)
        await asyncio.wait_for(counter.done.wait(), 600)
        print(f"{time.process_time() - began:.4f}", flush=True)
        await cache.stop()


def run_consumer(loop: str, kubeconfig: str, expected: int) -> None:
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(consume(kubeconfig, expected))
    else:
        asyncio.run(consume(kubeconfig, expected))


async def drive(plane: ControlPlane, objects: int, rounds: int, repeats: int) -> dict[str, Any]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        c = Manager(api, field_manager="bench", bind_address=None).client
        await c.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        limit = asyncio.Semaphore(IN_FLIGHT)
        blob = "x" * 3000

        async def create(i: int) -> None:
            async with limit:
                await c.create(configmap(f"cm-{i:04d}", NS, v="0", blob=blob))

        async def update(i: int, value: str) -> None:
            async with limit:
                await c.patch(CONFIGMAP, f"cm-{i:04d}", {"data": {"v": value}}, namespace=NS)

        await asyncio.gather(*(create(i) for i in range(objects)))
        cpu: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        for repeat in range(repeats):
            for loop in LOOPS:
                consumer = await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--consume",
                    loop,
                    str(plane.kubeconfig),
                    str(objects * rounds),
                    stdout=asyncio.subprocess.PIPE,
                )
                assert consumer.stdout is not None
                line = await consumer.stdout.readline()
                if line.strip() != b"ready":
                    raise RuntimeError(f"the {loop} consumer did not sync: {line!r}")
                for r in range(rounds):
                    value = f"{repeat}-{loop}-{r}"
                    await asyncio.gather(*(update(i, value) for i in range(objects)))
                seconds = float((await consumer.stdout.readline()).decode())
                await consumer.wait()
                cpu[loop].append(seconds)
                print(f"[{repeat}] {loop}: {seconds:.3f} CPU s for {objects * rounds} events")
    events = objects * rounds
    figures: dict[str, Any] = {"events": events, "objects": objects, "repeats": repeats}
    for loop, each in cpu.items():
        median = statistics.median(each)
        figures[loop] = {
            "cpu_seconds_median": round(median, 3),
            "cpu_seconds_each": [round(s, 3) for s in each],
            "us_per_event": round(median / events * 1e6, 1),
        }
    base = figures["asyncio"]["cpu_seconds_median"]
    figures["uvloop_over_asyncio"] = round(figures["uvloop"]["cpu_seconds_median"] / base, 3)
    return figures


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--consume":
        run_consumer(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6, help="updates of each object")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each loop")
    args = parser.parse_args()
    with ControlPlane() as plane:
        figures = asyncio.run(drive(plane, args.objects, args.rounds, args.repeats))
    for loop in LOOPS:
        f = figures[loop]
        print(f"{loop}: median {f['cpu_seconds_median']} CPU s, {f['us_per_event']} us/event")
    print(f"uvloop / asyncio: {figures['uvloop_over_asyncio']}")
    finish("loop_intake", figures)


if __name__ == "__main__":
    main()
