"""HTTP to the API server over a `Connection` (`_connection`): its pool, TLS and
credentials, with raw paths and plain-dict JSON bodies. Going around a generated client's
models keeps the hot paths (lists of 5,000 nodes, watch streams) free of model
(de)serialisation.

A shared session reading the proxy environment and `~/.netrc` for every request costs two
thread hops per request (a few percent of the operator's CPU in a rollout); ours shares
the connection's pool but reads the proxy environment once, when the transport is made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from enum import StrEnum
from typing import Any, TypedDict, Unpack

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from reconciler._connection import as_connection
from reconciler._decode import decode, encode
from reconciler._exceptions import ApiUnreachable, error_from_status
from reconciler._objects import Object

log = logging.getLogger("reconciler.transport")

JSON = "application/json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchType(StrEnum):
    """How the API server reads a PATCH body; each value is the request's content type."""

    MERGE = "application/merge-patch+json"
    """RFC 7386: maps merge key by key, `null` removes a key, a list is replaced whole."""
    JSON = "application/json-patch+json"
    """RFC 6902: a list of operations (`add`, `remove`, `test`, ...), all applied or none."""
    STRATEGIC_MERGE = "application/strategic-merge-patch+json"
    """Built-in kinds only: lists merge by their keys (a node's conditions by `type`); for
    labels and annotations it merges as `MERGE` does, and the API server applies it to a
    24 KB node for less CPU (0.6-0.8 s instead of 0.9 s for 1,000 label writes)."""


METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
"""An `Accept` asking for the answer's metadata only (a `PartialObjectMetadata`): the API
server then encodes and sends none of the object's spec and status."""

Params = Mapping[str, str | int | bool]
BeforeSend = Callable[[], None]


class RequestOptions(TypedDict, total=False):
    """What a request may say beyond its method and path; each key left out takes its
    default (no params or body, JSON both ways, the transport's timeout)."""

    params: Params | None
    body: Object | bytes | None
    content_type: str
    request_timeout: float | None
    before_send: BeforeSend | None
    decoder: Callable[[bytes], Any]
    accept: str


# Called once per request with (method, status code or "<error>", path), for request metrics.
RequestObserver = Callable[[str, str, str], None]


def resource_of(path: str) -> str:
    """The resource (and subresource) a request path is about: `/api/v1/namespaces/x/pods/p/
    status` -> "pods/status", `/apis/apps/v1/daemonsets` -> "daemonsets"; "" for others."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[0] == "api":
        parts = parts[2:]
    elif parts[0] == "apis":
        parts = parts[3:]
    else:
        return ""
    if len(parts) > 2 and parts[0] == "namespaces":
        parts = parts[2:]
    if not parts:
        return ""
    return "/".join(parts[0:1] + parts[2:3])


def _query(params: Params | None) -> dict[str, str]:
    if not params:
        return {}
    out: dict[str, str] = {}
    for key, value in params.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None


class Transport:
    """Raw requests and watch streams against one API server."""

    def __init__(
        self,
        api_client: Any,
        *,
        user_agent: str = "reconciler",
        request_timeout: float = 60.0,
        observe: RequestObserver | None = None,
    ) -> None:
        self.connection = as_connection(api_client)
        self.host: str = self.connection.host
        self._server_hostname: str | None = self.connection.tls_server_name
        self._proxy: str | None = self.connection.proxy
        self._proxy_auth: aiohttp.BasicAuth | None = None
        if self._proxy is None:
            try:
                proxy, self._proxy_auth = get_env_proxy_for_url(URL(self.host))
                self._proxy = str(proxy)
            except LookupError:
                pass  # no proxy for the API server in the environment
        self._own_session: aiohttp.ClientSession | None = None
        self._user_agent = user_agent
        self.request_timeout = request_timeout
        self._observe: RequestObserver = observe or (lambda method, code, path: None)

    @property
    def _session(self) -> aiohttp.ClientSession:
        """A session on the connection's pool (closed with it) that leaves the environment
        alone per request."""
        own = self._own_session
        if own is None or own.closed:
            shared = self.connection.pool()
            own = self._own_session = aiohttp.ClientSession(
                connector=shared.connector,
                connector_owner=False,
                trust_env=False,
                read_bufsize=2**21,  # one watch event may be as large as etcd allows (1.5 MiB)
                trace_configs=[_BEFORE_SEND],
            )
        return own

    async def close(self) -> None:
        """Close this transport's session; the connection's pool stays open for others."""
        own, self._own_session = self._own_session, None
        if own is not None and not own.closed:
            await own.close()

    async def _headers(self, content_type: str | None, accept: str = JSON) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self._user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(await self.connection.auth_headers())
        return headers

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Object:
        """One request; the decoded JSON answer, or a typed `ApiError` / `ApiUnreachable`.

        `before_send` is called once the request has a connection, right before its bytes
        go out (and once before that); an exception from it cancels the request. A check
        made earlier could be stale by then: a connection may take a while to open.
        `decoder` reads a successful answer (errors are always read whole); `accept` asks
        for its form (`METADATA_ONLY`: the object's metadata alone)."""
        _, doc = await self.request_with_status(method, path, **options)
        return doc

    async def request_with_status(
        self, method: str, path: str, **options: Unpack[RequestOptions]
    ) -> tuple[int, Object]:
        """Like `request`, with the success status: 201 tells a create from an update."""
        status, raw = await self._send(
            method,
            path,
            options.get("params"),
            options.get("body"),
            options.get("content_type", JSON),
            options.get("request_timeout"),
            options.get("before_send"),
            options.get("accept", JSON),
        )
        if not raw:
            return status, {}
        doc = options.get("decoder", decode)(raw)
        return status, doc if isinstance(doc, dict) else {"items": doc}

    async def request_bytes(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Object | bytes | None = None,
        content_type: str = JSON,
        request_timeout: float | None = None,
    ) -> bytes:
        """Like `request`, but the answer's body undecoded (for decoders that skip fields)."""
        _, raw = await self._send(method, path, params, body, content_type, request_timeout)
        return raw

    async def _send(
        self,
        method: str,
        path: str,
        params: Params | None,
        body: Object | bytes | None,
        content_type: str,
        request_timeout: float | None,
        before_send: BeforeSend | None = None,
        accept: str = JSON,
    ) -> tuple[int, bytes]:
        data = body if isinstance(body, bytes) or body is None else encode(body)
        headers = await self._headers(content_type if data is not None else None, accept)
        client_timeout = aiohttp.ClientTimeout(total=request_timeout or self.request_timeout)
        if before_send is not None:
            before_send()
        try:
            async with self._session.request(
                method,
                self.host + path,
                params=_query(params),
                data=data,
                headers=headers,
                timeout=client_timeout,
                server_hostname=self._server_hostname,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
                trace_request_ctx=before_send,
            ) as resp:
                self._observe(method, str(resp.status), path)
                raw = await resp.read()
                if resp.status >= 400:
                    if resp.status == 401:
                        self.connection.auth_rejected(headers)
                    raise error_from_status(resp.status, raw, _retry_after(resp.headers))
                return resp.status, raw
        except (TimeoutError, aiohttp.ClientConnectionError) as exc:
            self._observe(method, "<error>", path)
            raise ApiUnreachable(f"{method} {path}: {exc!r}") from exc

    @asynccontextmanager
    async def watch(
        self, path: str, params: Params, *, inactivity_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """Open a watch stream; iterate it for its events, one JSON `WatchEvent` per item.

        `inactivity_timeout` bounds the silence between two reads: even a quiet watch gets
        bookmarks (the first about two minutes in, then one a minute), so a longer silence
        means a half-open connection, not a quiet cluster.
        """
        headers = await self._headers(None)
        # No `sock_read`: aiohttp would arm and cancel a timer for every chunk the stream
        # brings (tens of thousands in a 1,000-node rollout). The answer's headers get a
        # deadline of their own; the stream, one `_Silence` timer.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout)
        try:
            async with asyncio.timeout(inactivity_timeout) as answered:
                async with self._session.get(
                    self.host + path,
                    params=_query(params),
                    headers=headers,
                    timeout=timeout,
                    server_hostname=self._server_hostname,
                    proxy=self._proxy,
                    proxy_auth=self._proxy_auth,
                ) as resp:
                    answered.reschedule(None)
                    self._observe("WATCH", str(resp.status), path)
                    if resp.status >= 400:
                        raw = await resp.read()
                        if resp.status == 401:
                            self.connection.auth_rejected(headers)
                        raise error_from_status(resp.status, raw, _retry_after(resp.headers))
                    yield _lines(resp, inactivity_timeout)
        except TimeoutError as exc:  # before ClientError: aiohttp's timeouts are both
            raise ApiUnreachable(f"watch {path}: no data for {inactivity_timeout}s") from exc
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise ApiUnreachable(f"watch {path}: {exc!r}") from exc


async def _call_before_send(session: aiohttp.ClientSession, context: Any, params: object) -> None:
    """aiohttp's hooks on the way to the socket: once a request holds a connection (new or
    reused), and again right before its bytes are handed to the transport (its headers when
    it has no body; its body, which aiohttp writes from a task of its own, possibly a loop
    turn later, when it has one). The last check runs with nothing to await between it and
    the write, so a process frozen (SIGSTOP) after it has already sent the request."""
    before_send = context.trace_request_ctx
    if callable(before_send):
        before_send()


_BEFORE_SEND = aiohttp.TraceConfig()
_BEFORE_SEND.on_connection_create_end.append(_call_before_send)
_BEFORE_SEND.on_connection_reuseconn.append(_call_before_send)
_BEFORE_SEND.on_request_headers_sent.append(_call_before_send)
_BEFORE_SEND.on_request_chunk_sent.append(_call_before_send)


class _Silence:
    """Ends a stream whose connection has brought no byte for `seconds`, with `TimeoutError`
    from its next read. Nothing is done per chunk: a timer looks at the byte count a
    quarter of the limit apart, so a silence is noticed within 1.25x the limit."""

    __slots__ = ("_bytes", "_content", "_handle", "_loop", "_seconds", "_since")

    CHECKS = 4
    """Looks per limit."""

    def __init__(self, content: aiohttp.StreamReader, seconds: float) -> None:
        self._content = content
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._bytes = content.total_bytes
        self._since = self._loop.time()
        self._handle: asyncio.TimerHandle | None = None
        self._arm()

    def _arm(self) -> None:
        self._handle = self._loop.call_later(self._seconds / self.CHECKS, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if self._content.total_bytes != self._bytes:
            self._bytes = self._content.total_bytes
            self._since = now
        if now - self._since < self._seconds:
            self._arm()
            return
        self._handle = None
        self._content.set_exception(TimeoutError(f"no data for {self._seconds}s"))

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


async def _lines(resp: aiohttp.ClientResponse, silence_limit: float) -> AsyncIterator[bytes]:
    # Split on newlines ourselves: readline() has a line-length cap and one event can be
    # as large as an etcd value (1.5 MiB).
    buf = bytearray()
    content = resp.content
    silence = _Silence(content, silence_limit)
    try:
        while True:
            chunk = await content.readany()
            if not chunk:
                if buf.strip():
                    yield bytes(buf)
                return
            buf += chunk
            start = 0
            while True:
                end = buf.find(b"\n", start)
                if end < 0:
                    break
                if end > start:
                    yield bytes(buf[start:end])
                start = end + 1
            if start:
                del buf[:start]
    finally:
        silence.stop()
