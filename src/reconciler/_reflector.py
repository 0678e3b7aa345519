"""List, then watch from the list's resourceVersion; the loop that keeps a cache current.

The server's watch cache answers `resourceVersion=0` lists without touching etcd, so the
first list is cheap. Watches ask for bookmarks so an idle watch still advances its
resourceVersion, which keeps a re-watch after a normal timeout from falling off the end of
the server's history. `410 Gone` means exactly that happened: relist. Throttling (429) and
server errors back off from 0.8 s to 30 s: the server is there and asks for less. An
unreachable server is different: nobody is being spared, and every second spent waiting
after it returns is a second the operator does not act. Those retries back off only to
about a second (jittered, so many clients spread out), from the last resourceVersion, so an
API server restart costs a re-watch, not a relist, when its history allows. Each outage is
reported to a shared `Connectivity`, which says so at WARNING once for every informer.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import Any, Protocol

from reconciler._backoff import Backoff
from reconciler._connectivity import Connectivity
from reconciler._decode import ObjectDecoder
from reconciler._exceptions import (
    ApiError,
    ApiUnreachable,
    Gone,
    ServerError,
    TooManyRequests,
    UnknownKind,
    error_from_status,
)
from reconciler._objects import GVK, Object, resource_version_of
from reconciler._restmapper import RESTMapper
from reconciler._scope import WHOLE_KIND, Scope
from reconciler._transport import Params, Transport

log = logging.getLogger("reconciler.reflector")

RELIST_PAGE_SIZE = 500

INACTIVITY_TIMEOUT = 180.0
"""Seconds of silence on a watch before it counts as a dead connection. A quiet watch (a
kind nobody writes) hears only bookmarks: on kube-apiserver 1.37 the first comes about two
minutes after the watch opens (120.5-121.9 s measured), then one a minute. At 120 s every
quiet watch was declared unreachable just before its first bookmark, a false outage every
two minutes."""


class Sink(Protocol):
    def replace(self, items: Sequence[Object], resource_version: str) -> None:
        """The full state as of `resource_version`."""
        ...

    def on_watch_event(self, event_type: str, obj: Object) -> None:
        """One watch event: ADDED, MODIFIED or DELETED."""
        ...


class Reflector:
    def __init__(
        self,
        transport: Transport,
        mapper: RESTMapper,
        gvk: GVK,
        sink: Sink,
        *,
        scope: Scope = WHOLE_KIND,
        decoder: ObjectDecoder | None = None,
        watch_timeout: tuple[int, int] = (300, 600),
        inactivity_timeout: float = INACTIVITY_TIMEOUT,
        backoff: Backoff | None = None,
        reconnect_backoff: Backoff | None = None,
        connectivity: Connectivity | None = None,
    ) -> None:
        self._transport = transport
        self._mapper = mapper
        self.gvk = gvk
        self._sink = sink
        self._decoder = decoder or ObjectDecoder()
        self.scope = scope
        self.watch_timeout = watch_timeout
        self.inactivity_timeout = inactivity_timeout
        self._backoff = backoff or Backoff()
        self._reconnect = reconnect_backoff or Backoff(initial=0.5, cap=1.5, jitter=0.5)
        self._connectivity = connectivity or Connectivity()
        self.last_sync_resource_version = ""
        self.lists = 0
        """Completed lists, including the first: tests and metrics read it."""
        self.watches = 0
        """Watch streams opened."""

    async def run(self) -> None:
        """Keep the sink current until cancelled. Never returns otherwise."""
        loop = asyncio.get_running_loop()
        path = ""
        # A reflector restarted after a pause resumes watching where it stopped; if the
        # server's history no longer reaches back that far, the watch says 410 and we relist.
        need_list = not self.last_sync_resource_version
        list_rv = "0"
        while True:
            try:
                if not path:
                    path = (await self._mapper.resource_for(self.gvk)).path(self.scope.namespace)
                if need_list:
                    try:
                        await self._list(path, list_rv)
                    except Gone:
                        # Our last resourceVersion is older than the server's history:
                        # ask for the latest, read through to etcd.
                        log.debug("%s: list at rv=%s expired; listing latest", self.gvk, list_rv)
                        await self._list(path, "")
                    need_list = False
                started = loop.time()
                if not await self._watch(path) and loop.time() - started < 1.0:
                    # A watch that ends at once with nothing in it would otherwise spin.
                    await asyncio.sleep(self._backoff.next())
            except asyncio.CancelledError:
                self._connectivity.forget(str(self.gvk))
                raise
            except Gone:
                log.debug("%s: watch expired; relisting", self.gvk)
                need_list = True
                list_rv = self.last_sync_resource_version or ""
                continue
            except (TooManyRequests, ServerError) as exc:
                delay = max(self._backoff.next(), exc.retry_after or 0.0)
                log.debug("%s: %s; retrying in %.1fs", self.gvk, exc, delay)
                await asyncio.sleep(delay)
            except ApiUnreachable as exc:
                # A new outage: errors from before it say nothing of the server that comes
                # back (on a resource without events nothing else would reset the backoff).
                self._backoff.reset()
                delay = self._reconnect.next()
                self._connectivity.lost(str(self.gvk), exc)
                log.debug("%s: %s; retrying in %.1fs", self.gvk, exc, delay)
                await asyncio.sleep(delay)
            except UnknownKind as exc:
                delay = self._backoff.next()
                log.warning("%s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
            except ApiError as exc:
                delay = self._backoff.next()
                log.warning("%s: list/watch failed: %s; retrying in %.1fs", self.gvk, exc, delay)
                need_list = True
                list_rv = self.last_sync_resource_version or ""
                await asyncio.sleep(delay)
            except Exception:
                delay = self._backoff.next()
                log.exception("%s: list/watch failed; retrying in %.1fs", self.gvk, delay)
                need_list = True
                list_rv = self.last_sync_resource_version or ""
                await asyncio.sleep(delay)

    async def _list(self, path: str, resource_version: str) -> None:
        params: dict[str, Any] = dict(self.scope.selectors)
        items: list[Object] = []
        request, decode_list = self._transport.request_bytes, self._decoder.list
        if resource_version:
            # Served from the watch cache, whole, no pagination (the server ignores limit).
            params["resourceVersion"] = resource_version
            items, list_meta = decode_list(await request("GET", path, params=params))
            rv = str(list_meta.get("resourceVersion") or "")
        else:
            # A consistent read from etcd: page it so neither side holds it all twice.
            params["limit"] = RELIST_PAGE_SIZE
            rv = ""
            while True:
                page, list_meta = decode_list(await request("GET", path, params=params))
                items.extend(page)
                rv = str(list_meta.get("resourceVersion") or rv)
                token = list_meta.get("continue")
                if not token:
                    break
                params["continue"] = token
        api_version, kind = self.gvk.api_version, self.gvk.kind
        for item in items:
            # List items come without apiVersion/kind; cached objects should carry theirs.
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        self._connected()
        self._sink.replace(items, rv)
        self.last_sync_resource_version = rv
        self.lists += 1
        log.debug("%s: listed %d objects at rv=%s", self.gvk, len(items), rv)

    def _connected(self) -> None:
        self._reconnect.reset()
        self._connectivity.restored(str(self.gvk))

    async def _watch(self, path: str) -> int:
        """Follow one watch stream to its end; returns how many events it carried."""
        timeout = random.randint(*self.watch_timeout)
        params: Params = {
            **self.scope.selectors,
            "watch": True,
            "resourceVersion": self.last_sync_resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout,
        }
        inactivity = min(self.inactivity_timeout, timeout + 30.0)
        async with self._transport.watch(path, params, inactivity_timeout=inactivity) as events:
            self.watches += 1
            self._connected()
            count = 0
            log.debug("%s: watching from rv=%s", self.gvk, self.last_sync_resource_version)
            decode_event = self._decoder.event
            async for line in events:
                event_type, obj = decode_event(line)
                if event_type == "ERROR":
                    raise error_from_status(int(obj.get("code") or 500), obj)
                count += 1
                rv = resource_version_of(obj)
                if event_type != "BOOKMARK":
                    self._sink.on_watch_event(event_type, obj)
                if rv:
                    self.last_sync_resource_version = rv
                self._backoff.reset()
        log.debug("%s: watch closed at rv=%s", self.gvk, self.last_sync_resource_version)
        return count
