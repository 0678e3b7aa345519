"""/healthz, /readyz and /metrics as a kubelet and Prometheus see them."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from reconciler.lowlevel import ProbeServer

pytestmark = pytest.mark.unit


async def test_probes_and_metrics() -> None:
    registry = CollectorRegistry()
    Counter("things", "Things", registry=registry).inc(3)
    ready = False
    server = ProbeServer("127.0.0.1", 0, registry, ready=lambda: ready)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(base + "/healthz") as r:
                assert r.status == 200
            async with s.get(base + "/readyz") as r:
                assert r.status == 503
            ready = True
            async with s.get(base + "/readyz") as r:
                assert r.status == 200
            async with s.get(base + "/metrics") as r:
                text = await r.text()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families["things"].samples[0].value == 3
    finally:
        await server.stop()
