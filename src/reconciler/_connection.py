"""One API server's address, TLS and credentials, with a connection pool to it.

The operator used to reach the server through a kubernetes_asyncio `ApiClient` only to
borrow its pool and auth hook; importing that package loads every generated model and API
class (about 63 MiB of resident memory, a quarter of the operator's at 2,000 nodes) that
the transport never calls. `ApiConnection` is what the transport needs and nothing more.

A kubernetes_asyncio `ApiClient` still works wherever a connection is taken (the tests'
fixtures, kubeconfigs with exec plugins or auth providers, see `_kubeconfig`):
`as_connection` adapts it without importing that package here.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import aiohttp

TOKEN_REREAD_SECONDS = 60.0
"""How often a token file is read again: the kubelet rotates projected service-account
tokens well before they expire, and client-go re-reads the file about every minute."""


@runtime_checkable
class Connection(Protocol):
    """What a `Transport` needs from whatever knows how to reach the API server."""

    host: str
    """`https://server:port`, no trailing slash."""
    tls_server_name: str | None
    proxy: str | None

    async def auth_headers(self) -> dict[str, str]: ...

    def auth_rejected(self, sent: Mapping[str, str]) -> None:
        """The server answered 401 to a request that carried the headers `sent`."""
        ...

    def pool(self) -> aiohttp.ClientSession:
        """A session whose connector (TLS context, connection pool) requests share; it is
        closed with the connection."""
        ...


class Credentials(Protocol):
    async def headers(self) -> dict[str, str]: ...

    def rejected(self, sent: Mapping[str, str]) -> None:
        """A 401 answered a request sent with `sent`: a source that can find a newer
        credential looks again before the next request."""
        ...


class NoCredentials:
    """Client certificates (in the TLS context) or an anonymous client."""

    async def headers(self) -> dict[str, str]:
        return {}

    def rejected(self, sent: Mapping[str, str]) -> None:
        pass


class StaticToken:
    def __init__(self, token: str) -> None:
        self._header = {"Authorization": f"Bearer {token}"}

    async def headers(self) -> dict[str, str]:
        return self._header

    def rejected(self, sent: Mapping[str, str]) -> None:
        pass


class TokenFile:
    """A bearer token read from a file, again every `TOKEN_REREAD_SECONDS` (rotation), and
    before the next request once the server rejects it (401), as client-go does: a token
    revoked before its file's next read costs one failed request, not a minute of them."""

    def __init__(
        self,
        path: Path,
        clock: Callable[[], float] = time.monotonic,
        every: float = TOKEN_REREAD_SECONDS,
    ) -> None:
        self.path = path
        self._clock = clock
        self._every = every
        self._token = ""
        self._read_at = float("-inf")

    async def headers(self) -> dict[str, str]:
        now = self._clock()
        if now - self._read_at >= self._every:
            token = self.path.read_text().strip()
            if token:  # a file caught mid-rotation keeps the last good token
                self._token = token
            self._read_at = now
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def rejected(self, sent: Mapping[str, str]) -> None:
        # Only for the token read last: a request sent before the file was read again says
        # nothing about the new token.
        if self._token and sent.get("Authorization") == f"Bearer {self._token}":
            self._read_at = float("-inf")


class ApiConnection:
    """An API server's address, TLS context and credentials, and its connection pool.

    Use as `async with connection:` (or call `close()`): the pool is opened on first use,
    in the running event loop, and closed with the connection."""

    def __init__(
        self,
        host: str,
        *,
        ssl_context: ssl.SSLContext | None,
        credentials: Credentials | None = None,
        tls_server_name: str | None = None,
        proxy: str | None = None,
    ) -> None:
        self.host = host.rstrip("/")
        self.ssl_context = ssl_context
        self.credentials: Credentials = credentials or NoCredentials()
        self.tls_server_name = tls_server_name or None
        self.proxy = proxy or None
        self._session: aiohttp.ClientSession | None = None

    async def auth_headers(self) -> dict[str, str]:
        return await self.credentials.headers()

    def auth_rejected(self, sent: Mapping[str, str]) -> None:
        self.credentials.rejected(sent)

    def pool(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            # ssl=False only when no context was asked for (plain http); a context that
            # skips verification is the kubeconfig's `insecure-skip-tls-verify`.
            connector = aiohttp.TCPConnector(
                ssl=self.ssl_context if self.ssl_context is not None else False, limit=100
            )
            session = self._session = aiohttp.ClientSession(connector=connector)
        return session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class _ApiClientConnection:
    """A kubernetes_asyncio `ApiClient` seen as a `Connection` (duck-typed: nothing of
    that package is imported here)."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client
        config = api_client.configuration
        self._config = config
        self.host = str(config.host).rstrip("/")
        self.tls_server_name: str | None = getattr(config, "tls_server_name", None) or None
        self.proxy: str | None = getattr(config, "proxy", None) or None

    async def auth_headers(self) -> dict[str, str]:
        # auth_settings() runs its refresh hook (exec plugins, rotated tokens).
        settings: Callable[[], Awaitable[dict[str, Any]]] = self._config.auth_settings
        headers: dict[str, str] = {}
        for setting in (await settings()).values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def auth_rejected(self, sent: Mapping[str, str]) -> None:
        pass  # kubernetes_asyncio refreshes its own credentials (exec plugins' expiry)

    def pool(self) -> aiohttp.ClientSession:
        session: aiohttp.ClientSession = self._api.rest_client.pool_manager
        return session


def as_connection(api: Any) -> Connection:
    """`api` itself when it is a `Connection`, else the kubernetes_asyncio `ApiClient` it
    must be, adapted."""
    if isinstance(api, Connection):
        return api
    if not hasattr(api, "configuration"):
        raise TypeError(f"not an API connection or kubernetes_asyncio ApiClient: {api!r}")
    return _ApiClientConnection(api)
