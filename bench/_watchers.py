"""The operator's informers and nothing else: its watches, its decoding and its indexes,
without a controller, a handler or a write.

`scale.py --watchers` runs this beside the labelled floor. The operator's run makes the
same requests as the labelled floor but for a few dozen, yet the control plane spends more
CPU in it; this tells how much of that its watches alone cost the API server (a JSON
encoding and a stream per event to one more watcher).

    .venv/bin/python bench/_watchers.py KUBECONFIG NAMESPACE

Prints one line, `synced`, once every informer has listed.
"""

from __future__ import annotations

import asyncio
import sys

import uvloop

from components.controllers._informers import register_all
from reconciler import Manager, connect

SYNCED = "synced"
SYNC_TIMEOUT = 300.0


async def watch(kubeconfig: str, namespace: str) -> None:
    api = await connect(kubeconfig)
    async with api:
        manager = Manager(api, field_manager="bench-watchers", bind_address=None)
        register_all(manager, namespace)
        await manager.cache.start()
        await manager.cache.wait_for_sync(SYNC_TIMEOUT)
        print(SYNCED, flush=True)  # the benchmark starts its clock on this line
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(watch(sys.argv[1], sys.argv[2]))
