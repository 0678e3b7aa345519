"""The list/watch protocol, step by step, against a scripted transport.

The real API server is used for the same behaviour in tests/integration; this pins down the
exact requests (resourceVersion, bookmarks, relist after 410, backoff on 429).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from reconciler import GVK, Informer, ObjectKey
from reconciler.errors import ApiUnreachable, Gone, TooManyRequests
from reconciler.lowlevel import Backoff, Reflector, Resource, RESTMapper, Scope, Transport

pytestmark = pytest.mark.unit

CM = GVK("", "v1", "ConfigMap")


def cm(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


class Script:
    """Answers lists and watches from queues of canned responses; records what was asked."""

    def __init__(self) -> None:
        self.lists: list[Any] = []
        self.watches: list[Any] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.idle = asyncio.Event()

    async def request_bytes(self, method: str, path: str, **kw: Any) -> bytes:
        params = dict(kw.get("params") or {})
        self.calls.append(("list", params))
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return json.dumps(answer).encode()

    @asynccontextmanager
    async def watch(
        self, path: str, params: Any, *, inactivity_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.calls.append(("watch", dict(params)))
        if not self.watches:
            self.idle.set()
            await asyncio.sleep(3600)
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer

        async def events() -> AsyncIterator[bytes]:
            for event in answer:
                yield json.dumps(event).encode()

        yield events()


class Rec:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, o: Any) -> None:
        self.events.append(("add", o["metadata"]["name"]))

    def on_update(self, old: Any, o: Any) -> None:
        self.events.append(("update", o["metadata"]["name"]))

    def on_delete(self, o: Any) -> None:
        self.events.append(("delete", o["metadata"]["name"]))


async def test_list_watch_bookmark_410_relist_and_backoff() -> None:
    script = Script()
    script.lists = [
        {"metadata": {"resourceVersion": "10"}, "items": [cm("a", "5"), cm("b", "6")]},
        # relist after 410: b was deleted and c changed meanwhile
        {"metadata": {"resourceVersion": "30"}, "items": [cm("a", "5"), cm("c", "25")]},
    ]
    script.watches = [
        [
            {"type": "ADDED", "object": cm("c", "11")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
            {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}},
        ],
        TooManyRequests(429, "TooManyRequests", "slow down"),
    ]
    transport = Transport(type("Api", (), {"configuration": type("C", (), {"host": "h"})()})())
    mapper = RESTMapper(transport)
    mapper.register(Resource(CM, "configmaps", True))
    informer = Informer(transport, mapper, CM)
    rec = Rec()
    informer.add_handler(rec)
    reflector = Reflector(
        script,  # type: ignore[arg-type]
        mapper,
        CM,
        informer,
        backoff=Backoff(initial=0.001, cap=0.002),
    )
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(script.idle.wait(), 10)
    task.cancel()

    kinds = [(kind, p.get("resourceVersion")) for kind, p in script.calls]
    assert kinds == [
        ("list", "0"),  # first list from the watch cache
        ("watch", "10"),  # from the list's resourceVersion
        ("list", "15"),  # 410: relist, not older than the bookmark
        ("watch", "30"),  # 429: back off, then
        ("watch", "30"),  # watch again from where we were
    ]
    first_watch = script.calls[1][1]
    assert first_watch["allowWatchBookmarks"] is True
    assert 300 <= first_watch["timeoutSeconds"] <= 600
    assert rec.events[:3] == [("add", "a"), ("add", "b"), ("add", "c")]
    assert sorted(rec.events[3:]) == [("delete", "b"), ("update", "c")]
    assert informer.store.get(ObjectKey("ns", "b")) is None
    cached = informer.store.get(ObjectKey("ns", "a"))
    assert cached is not None and cached["kind"] == "ConfigMap", "list items get their kind"


async def test_expired_relist_falls_back_to_a_consistent_paged_list() -> None:
    script = Script()
    script.lists = [
        Gone(410, "Expired", "too old"),
        {"metadata": {"resourceVersion": "40", "continue": "tok"}, "items": [cm("a", "1")]},
        {"metadata": {"resourceVersion": "40"}, "items": [cm("b", "2")]},
    ]
    transport = Transport(type("Api", (), {"configuration": type("C", (), {"host": "h"})()})())
    mapper = RESTMapper(transport)
    mapper.register(Resource(CM, "configmaps", True))
    informer = Informer(transport, mapper, CM)
    reflector = Reflector(script, mapper, CM, informer)  # type: ignore[arg-type]
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(script.idle.wait(), 10)
    task.cancel()
    lists = [p for kind, p in script.calls if kind == "list"]
    assert lists[0]["resourceVersion"] == "0"
    assert "resourceVersion" not in lists[1] and lists[1]["limit"] == 500
    assert lists[2]["continue"] == "tok"
    assert len(informer.store) == 2
    assert script.calls[-1][1]["resourceVersion"] == "40"


async def test_a_scoped_reflector_lists_and_watches_one_namespace_by_its_selectors() -> None:
    """The scope is what the server is asked for: a selector left out of one request would
    fill the cache with the whole kind, or drop objects the watch then adds back."""
    script = Script()
    script.lists = [{"metadata": {"resourceVersion": "7"}, "items": [cm("a", "5")]}]
    paths: list[str] = []
    request_bytes = script.request_bytes

    async def recording(method: str, path: str, **kw: Any) -> bytes:
        paths.append(path)
        return await request_bytes(method, path, **kw)

    script.request_bytes = recording  # type: ignore[method-assign]
    transport = Transport(type("Api", (), {"configuration": type("C", (), {"host": "h"})()})())
    mapper = RESTMapper(transport)
    mapper.register(Resource(CM, "configmaps", True))
    scope = Scope("ns", label_selector="app=x", field_selector="metadata.name=a")
    informer = Informer(transport, mapper, CM, scope=scope)
    reflector = Reflector(script, mapper, CM, informer, scope=scope)  # type: ignore[arg-type]
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(script.idle.wait(), 10)
    task.cancel()
    assert paths == ["/api/v1/namespaces/ns/configmaps"]
    selectors = {"labelSelector": "app=x", "fieldSelector": "metadata.name=a"}
    for kind, params in script.calls:
        assert {k: params.get(k) for k in selectors} == selectors, kind
    assert [kind for kind, _ in script.calls] == ["list", "watch"]
    assert informer.namespace == "ns" and informer.label_selector == "app=x"


class RecordedBackoff(Backoff):
    """A Backoff without jitter that keeps the delays it gave."""

    def __init__(self) -> None:
        super().__init__(initial=0.001, cap=1.0, jitter=0.0)
        self.delays: list[float] = []

    def next(self) -> float:
        delay = super().next()
        self.delays.append(delay)
        return delay


async def test_each_outage_backs_off_from_the_start_on_a_quiet_resource() -> None:
    """A restarted API server answers 429 while its storage initialises. A resource with
    no events (a CRD nobody uses) never resets the backoff through a watch event, so
    before, each outage took up where the last left off: after five restarts of the API
    server the operator's NVIDIADriver informer waited 29 s to come back, and /readyz
    said not ready all that time."""
    script = Script()
    script.lists = [{"metadata": {"resourceVersion": "10"}, "items": []}]
    script.watches = []
    for _ in range(3):
        script.watches += [
            ApiUnreachable("connection refused"),
            TooManyRequests(429, "TooManyRequests", "storage is (re)initializing"),
            [],  # the watch opens again, and nothing ever happens on this resource
        ]
    transport = Transport(type("Api", (), {"configuration": type("C", (), {"host": "h"})()})())
    mapper = RESTMapper(transport)
    mapper.register(Resource(CM, "configmaps", True))
    informer = Informer(transport, mapper, CM)
    backoff = RecordedBackoff()
    reflector = Reflector(
        script,  # type: ignore[arg-type]
        mapper,
        CM,
        informer,
        backoff=backoff,
        reconnect_backoff=Backoff(initial=0.001, cap=0.002),
    )
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(script.idle.wait(), 10)
    task.cancel()

    after_429 = backoff.delays[::2]  # each empty watch that ends at once backs off too
    assert len(after_429) == 3
    assert after_429 == [0.001, 0.001, 0.001], backoff.delays
