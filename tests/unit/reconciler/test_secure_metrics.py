"""Secure metrics without a cluster: HTTPS with the self-signed or a mounted certificate,
no token means 401, and the verdict cache (how often the API server is asked)."""

from __future__ import annotations

import ssl
from http import HTTPStatus
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from reconciler._tls import self_signed_pem, serving_context
from reconciler.errors import ApiUnreachable
from reconciler.lowlevel import MetricsAuthorizer, MetricsServer, ProbeServer

pytestmark = pytest.mark.unit


class ReviewingServer:
    """Answers TokenReviews and SubjectAccessReviews as `tokens` says, counting them."""

    def __init__(self, tokens: dict[str, bool]) -> None:
        self.tokens = tokens  # token -> may get /metrics
        self.reviews: list[str] = []
        self.down = False

    async def request(self, method: str, path: str, *, body: dict[str, Any]) -> dict[str, Any]:
        if self.down:
            raise ApiUnreachable("connection refused")
        self.reviews.append(body["kind"])
        if body["kind"] == "TokenReview":
            token = body["spec"]["token"]
            if token not in self.tokens:
                return {"status": {"authenticated": False}}
            return {"status": {"authenticated": True, "user": {"username": token}}}
        spec = body["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": self.tokens[spec["user"]]}}


def authorizer(server: ReviewingServer, now: list[float], **kw: Any) -> MetricsAuthorizer:
    return MetricsAuthorizer(server, clock=lambda: now[0], **kw)  # type: ignore[arg-type]


async def test_verdicts_come_from_the_reviews_and_are_cached_for_the_ttl() -> None:
    server = ReviewingServer({"prometheus": True, "stranger": False})
    now = [0.0]
    auth = authorizer(server, now, ttl=60.0)
    assert await auth.verdict(None, "GET", "/metrics") == HTTPStatus.UNAUTHORIZED
    assert await auth.verdict("Basic abc", "GET", "/metrics") == HTTPStatus.UNAUTHORIZED
    assert server.reviews == []  # no token: the API server is not asked
    assert await auth.verdict("Bearer forged", "GET", "/metrics") == HTTPStatus.UNAUTHORIZED
    assert await auth.verdict("Bearer stranger", "GET", "/metrics") == HTTPStatus.FORBIDDEN
    assert await auth.verdict("Bearer prometheus", "GET", "/metrics") == HTTPStatus.OK
    asked = len(server.reviews)
    now[0] = 59.0
    assert await auth.verdict("Bearer prometheus", "GET", "/metrics") == HTTPStatus.OK
    assert len(server.reviews) == asked
    server.tokens["prometheus"] = False  # the binding was deleted
    now[0] = 61.0
    assert await auth.verdict("Bearer prometheus", "GET", "/metrics") == HTTPStatus.FORBIDDEN


async def test_the_cache_is_bounded_and_failures_are_not_cached() -> None:
    server = ReviewingServer({f"t{i}": True for i in range(5)} | {"late": True})
    now = [0.0]
    auth = authorizer(server, now, max_entries=3)
    for i in range(5):
        await auth.verdict(f"Bearer t{i}", "GET", "/metrics")
    server.reviews.clear()
    await auth.verdict("Bearer t4", "GET", "/metrics")
    assert server.reviews == []  # recent: cached
    await auth.verdict("Bearer t0", "GET", "/metrics")
    assert server.reviews  # the oldest was dropped
    server.down = True
    assert await auth.verdict("Bearer late", "GET", "/metrics") == 500
    server.down = False
    assert await auth.verdict("Bearer late", "GET", "/metrics") == HTTPStatus.OK


async def test_secure_metrics_are_https_and_refuse_a_scrape_without_a_token() -> None:
    registry = CollectorRegistry()
    Counter("things", "Things", registry=registry).inc()
    server = ReviewingServer({"prometheus": True})
    metrics = MetricsServer(
        "127.0.0.1",
        0,
        registry,
        tls=serving_context(None),
        authorizer=MetricsAuthorizer(server),  # type: ignore[arg-type]
    )
    probes = ProbeServer("127.0.0.1", 0, registry, ready=lambda: True, serve_metrics=False)
    await metrics.start()
    await probes.start()
    url = f"https://127.0.0.1:{metrics.port}/metrics"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url, ssl=False) as r:
                assert r.status == 401
            auth = {"Authorization": "Bearer prometheus"}
            async with s.get(url, ssl=False, headers=auth) as r:
                assert r.status == 200
                assert "things_total 1.0" in await r.text()
            async with s.get(f"http://127.0.0.1:{probes.port}/metrics") as r:
                assert r.status == 404
    finally:
        await metrics.stop()
        await probes.stop()


async def test_a_mounted_certificate_is_served(tmp_path: Path) -> None:
    cert, key = self_signed_pem(["gpu-operator.gpu-operator.svc"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    metrics = MetricsServer("127.0.0.1", 0, CollectorRegistry(), tls=serving_context(str(tmp_path)))
    await metrics.start()
    trusted = ssl.create_default_context(cadata=cert.decode())
    try:
        async with (
            aiohttp.ClientSession() as s,
            s.get(
                f"https://127.0.0.1:{metrics.port}/metrics",
                ssl=trusted,
                server_hostname="gpu-operator.gpu-operator.svc",
            ) as r,
        ):
            assert r.status == 200
    finally:
        await metrics.stop()
