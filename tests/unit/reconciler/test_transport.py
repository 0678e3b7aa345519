"""The transport against a local HTTP server: watch streams and a half-open connection."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from reconciler import ApiConnection
from reconciler.errors import ApiUnreachable, LeaderElectionLost, NotFound
from reconciler.lowlevel import StaticToken, Transport

pytestmark = pytest.mark.unit


class FakeApiClient:
    """Just what Transport borrows from a kubernetes_asyncio ApiClient."""

    def __init__(self, host: str, session: aiohttp.ClientSession) -> None:
        async def auth_settings() -> dict[str, Any]:
            return {"BearerToken": {"in": "header", "key": "authorization", "value": "Bearer t"}}

        self.configuration = type(
            "C", (), {"host": host, "auth_settings": staticmethod(auth_settings)}
        )()
        self.rest_client = type("R", (), {"pool_manager": session})()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    async def watch(request: web.Request) -> web.StreamResponse:
        seen.append({k.lower(): v for k, v in request.headers.items()})
        resp = web.StreamResponse()
        await resp.prepare(request)
        big = {"type": "ADDED", "object": {"metadata": {"name": "x" * 300_000}}}
        await resp.write(json.dumps(big).encode() + b"\n")
        await resp.write(b'{"type": "MODIFIED", "object": {"metadata": {"name": "y"}}}\n')
        if request.query.get("hang") == "1":
            await asyncio.sleep(3600)  # headers and data sent, then silence: half-open
        for _ in range(int(request.query.get("trickle", "0"))):
            await asyncio.sleep(0.05)  # a slow stream, never silent for long
            await resp.write(b'{"type": "MODIFIED", "object": {"metadata": {"name": "z"}}}\n')
        return resp

    async def unanswered(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3600)  # the request is taken, no answer ever comes
        raise AssertionError("unreachable")

    async def missing(request: web.Request) -> web.Response:
        body = {
            "kind": "Status",
            "code": 404,
            "reason": "NotFound",
            "message": 'pods "p" not found',
        }
        return web.json_response(body, status=404)

    app = web.Application()
    app.router.add_get("/watch", watch)
    app.router.add_get("/missing", missing)
    app.router.add_get("/unanswered", unanswered)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}", seen
    await runner.cleanup()


async def test_stream_with_long_lines_and_auth(server: tuple[str, list[dict[str, str]]]) -> None:
    host, seen = server
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        async with transport.watch("/watch", {}, inactivity_timeout=10) as events:
            got = [json.loads(e) async for e in events]
    assert [e["type"] for e in got] == ["ADDED", "MODIFIED"]
    assert len(got[0]["object"]["metadata"]["name"]) == 300_000
    assert seen[0]["authorization"] == "Bearer t"


async def test_silent_connection_is_abandoned(server: tuple[str, list[dict[str, str]]]) -> None:
    host, _ = server
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        got = []
        with pytest.raises(ApiUnreachable, match="no data"):
            async with transport.watch("/watch", {"hang": 1}, inactivity_timeout=0.2) as events:
                async for event in events:
                    got.append(event)
        assert len(got) == 2, "events before the silence were delivered"


async def test_a_watch_never_answered_is_abandoned(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    host, _ = server
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        with pytest.raises(ApiUnreachable, match="no data"):
            async with transport.watch("/unanswered", {}, inactivity_timeout=0.2) as events:
                [e async for e in events]


async def test_a_slow_stream_is_not_taken_for_silence(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    """Events 0.05 s apart for 1 s, under a silence limit of 0.2 s: the limit is on the
    gap between two reads, not on the stream's length."""
    host, _ = server
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        async with transport.watch("/watch", {"trickle": 20}, inactivity_timeout=0.2) as events:
            got = [e async for e in events]
    assert len(got) == 22


async def test_error_status_is_typed(server: tuple[str, list[dict[str, str]]]) -> None:
    host, _ = server
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        with pytest.raises(NotFound, match='pods "p" not found'):
            await transport.request("GET", "/missing")


async def test_unreachable_server_is_typed() -> None:
    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient("http://127.0.0.1:9", session))
        with pytest.raises(ApiUnreachable):
            await transport.request("GET", "/x")


@pytest.fixture
async def recorder() -> AsyncIterator[tuple[str, list[str]]]:
    """A server that records the method of every request it receives: (its URL, methods)."""
    received: list[str] = []

    async def record(request: web.Request) -> web.Response:
        received.append(request.method)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/things", record)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", received
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("pooled", [False, True], ids=["new-connection", "pooled-connection"])
async def test_a_write_whose_check_fails_by_connection_time_is_never_sent(
    pooled: bool, recorder: tuple[str, list[str]]
) -> None:
    """A leader may freeze between deciding to write and its connection being ready; the
    check made once the connection is there must stop the write."""
    host, received = recorder
    calls = 0

    def lease_lapses_while_connecting() -> None:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise LeaderElectionLost("lease expired")

    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        if pooled:
            await transport.request("GET", "/things")  # leaves a connection in the pool
        with pytest.raises(LeaderElectionLost):
            await transport.request(
                "POST", "/things", body={}, before_send=lease_lapses_while_connecting
            )
        await transport.request("GET", "/things")  # the transport still works
    assert calls == 2
    assert "POST" not in received


@pytest.mark.parametrize("passes", [2, 3], ids=["at-headers", "at-body"])
async def test_a_write_whose_check_fails_right_before_its_bytes_is_never_sent(
    passes: int, recorder: tuple[str, list[str]]
) -> None:
    """aiohttp writes a request's body from a task of its own, possibly a loop turn after
    the connection check: a leader frozen in between must not send it when thawed. The
    check runs again right before the headers and the body reach the socket."""
    host, received = recorder
    calls = 0

    def lease_lapses_before_the_bytes() -> None:
        nonlocal calls
        calls += 1
        if calls > passes:
            raise LeaderElectionLost("lease expired")

    async with aiohttp.ClientSession() as session:
        transport = Transport(FakeApiClient(host, session))
        with pytest.raises((LeaderElectionLost, ApiUnreachable)):
            await transport.request(
                "POST", "/things", body={"a": 1}, before_send=lease_lapses_before_the_bytes
            )
        await transport.request("GET", "/things")  # the transport still works
    assert calls == passes + 1
    assert "POST" not in received


async def test_our_connection_with_a_token_and_closing_the_transport(
    server: tuple[str, list[dict[str, str]]],
) -> None:
    """`ApiConnection` (no kubernetes_asyncio): its token reaches the server; closing a
    transport closes its own session only, so another transport on the same connection
    goes on working, and closing the connection closes the pool."""
    host, seen = server
    async with ApiConnection(host, ssl_context=None, credentials=StaticToken("ours")) as conn:
        first, second = Transport(conn), Transport(conn)
        with pytest.raises(NotFound):
            await first.request("GET", "/missing")
        await first.close()
        async with second.watch("/watch", {}, inactivity_timeout=10) as events:
            assert len([e async for e in events]) == 2
        assert seen[-1]["authorization"] == "Bearer ours"
        pool = conn.pool()
    assert pool.closed
