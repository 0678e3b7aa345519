"""Asks a registry, through the OCI distribution API, whether a manifest exists.

`HEAD /v2/<name>/manifests/<reference>` with the Accept headers of OCI and Docker
manifests and indexes (a registry answers 404 for a manifest of a media type the client
does not accept); a registry that refuses HEAD is asked with GET. 401 is answered once with
the challenge's scheme: Basic with the pull secret's credentials, or Bearer through the
token realm. What comes out is one of four verdicts, and only `MISSING` is the registry
saying the image is not there: an unreachable registry, or one that refuses us, says
nothing about what the kubelets (perhaps through a mirror, perhaps with node credentials)
will get.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp

from components.preflight._auth import BasicAuth, Challenge, parse_challenge
from components.preflight._reference import ImageRef

log = logging.getLogger("components.preflight")

MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


class Verdict(StrEnum):
    PRESENT = "Present"
    MISSING = "Missing"
    UNREACHABLE = "Unreachable"
    """No answer, or one that is no answer (5xx, a timeout, a refused connection)."""
    DENIED = "Denied"
    """The registry refused our credentials (or our lack of them)."""


@dataclass(frozen=True, slots=True)
class Check:
    image: str
    verdict: Verdict
    detail: str = ""
    """Why, for a verdict other than PRESENT (what the registry or the network said)."""


class RegistryClient:
    """One aiohttp session for every registry; created on first use on the running loop."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 3.0))
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def check(self, ref: ImageRef, credentials: BasicAuth | None = None) -> Check:
        try:
            return await self._check(ref, credentials)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = str(exc) or type(exc).__name__
            return Check(ref.text, Verdict.UNREACHABLE, f"{ref.host}: {detail}")

    async def _check(self, ref: ImageRef, credentials: BasicAuth | None) -> Check:
        status, challenge = await self._ask(ref, None)
        if status == 401:
            authorization = await self._answer(ref, challenge, credentials)
            if authorization is None:
                who = "without credentials" if credentials is None else "with the pull secret"
                return Check(ref.text, Verdict.DENIED, f"{ref.host} refused us {who}")
            status, _ = await self._ask(ref, authorization)
        if status == 200:
            return Check(ref.text, Verdict.PRESENT)
        if status == 404:
            return Check(ref.text, Verdict.MISSING, f"{ref.host} has no manifest {ref.reference}")
        if status in (401, 403):
            return Check(ref.text, Verdict.DENIED, f"{ref.host} answered {status}")
        return Check(ref.text, Verdict.UNREACHABLE, f"{ref.host} answered {status}")

    async def _ask(self, ref: ImageRef, authorization: str | None) -> tuple[int, Challenge | None]:
        headers = {"Accept": MANIFEST_TYPES}
        if authorization:
            headers["Authorization"] = authorization
        session = self._client()
        async with session.head(ref.manifest_url, headers=headers, allow_redirects=True) as r:
            status, challenge = r.status, parse_challenge(r.headers.get("WWW-Authenticate"))
        if status in (405, 501):
            # Some registries serve manifests to GET only.
            async with session.get(ref.manifest_url, headers=headers) as r:
                status, challenge = r.status, parse_challenge(r.headers.get("WWW-Authenticate"))
        return status, challenge

    async def _answer(
        self, ref: ImageRef, challenge: Challenge | None, credentials: BasicAuth | None
    ) -> str | None:
        """The Authorization header a challenge asks for, or None when we have none to give."""
        if challenge is None:
            return None
        if challenge.scheme == "basic":
            return credentials.header() if credentials is not None else None
        if challenge.scheme != "bearer" or not challenge.params.get("realm"):
            return None
        token = await self._token(ref, challenge, credentials)
        return f"Bearer {token}" if token else None

    async def _token(
        self, ref: ImageRef, challenge: Challenge, credentials: BasicAuth | None
    ) -> str | None:
        params = {"scope": challenge.params.get("scope") or f"repository:{ref.repository}:pull"}
        if challenge.params.get("service"):
            params["service"] = challenge.params["service"]
        headers = {"Authorization": credentials.header()} if credentials else {}
        async with self._client().get(
            challenge.params["realm"], params=params, headers=headers
        ) as r:
            if r.status != 200:
                return None
            try:
                body: Any = await r.json(content_type=None)
            except (ValueError, aiohttp.ContentTypeError):
                return None
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        return str(token) if token else None
