"""Work-queue throughput: add + get + done cycles per second, in one process.

Three key-space sizes: 1 key (every add collapses or waits for done), 10 keys, and
100,000 keys (the queue holds every key; each cycle re-adds the key it just finished, so it
goes to the back). Measured for the bare queue and for the rate-limiting queue with
Prometheus metrics, which is what a controller runs. Target: >= 50,000 cycles/s.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client import CollectorRegistry

from _common import finish
from reconciler import metrics_for
from reconciler.lowlevel import PrometheusQueueMetrics, Queue, RateLimitingQueue

CYCLES = 300_000


async def cycles_per_second(queue: Queue[int], keys: int, cycles: int) -> float:
    for k in range(keys):
        queue.add(k)
    get, done, add = queue.get, queue.done, queue.add
    began = time.perf_counter()
    for _ in range(cycles):
        key = await get()
        done(key)
        add(key)
    elapsed = time.perf_counter() - began
    return cycles / elapsed


async def main() -> None:
    figures: dict[str, float] = {}
    for keys in (1, 10, 100_000):
        bare = await cycles_per_second(Queue(), keys, CYCLES)
        metrics = PrometheusQueueMetrics(metrics_for(CollectorRegistry()), "bench")
        full = await cycles_per_second(RateLimitingQueue("bench", metrics=metrics), keys, CYCLES)
        figures[f"queue_cycles_per_s_{keys}_keys"] = round(bare)
        figures[f"rate_limited_queue_with_metrics_cycles_per_s_{keys}_keys"] = round(full)
        print(f"{keys:>7} keys: queue {bare:>10,.0f}/s   rate-limited+metrics {full:>10,.0f}/s")
    figures["cycles_measured"] = CYCLES
    finish("queue_throughput", figures)


if __name__ == "__main__":
    asyncio.run(main())
