"""Who may scrape `/metrics`: the API server decides, as for controller-runtime's secure
metrics.

The scraper's bearer token goes to a TokenReview (who is this?), then its user to a
SubjectAccessReview for the non-resource URL and verb (may they?). So one ClusterRole rule,
`nonResourceURLs: [/metrics], verbs: [get]`, grants scraping, and revoking it works like
any other RBAC change. No token: 401; a token the API server does not accept: 401; a user
without the rule: 403.

Verdicts are cached for `ttl` seconds (a Prometheus scraping every 15 s costs two reviews a
minute, not eight), keyed by a hash of the token so the cache holds no credential, and
bounded: the oldest entry goes when `max_entries` is reached. A review that fails (the API
server is gone) is not cached and answers 500, so the next scrape asks again.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from reconciler._exceptions import ApiError, ApiUnreachable
from reconciler._transport import Transport

log = logging.getLogger("reconciler.metrics.auth")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

#: HTTP method -> the Kubernetes verb a SubjectAccessReview asks about.
VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "DELETE": "delete"}


class MetricsAuthorizer:
    def __init__(
        self,
        transport: Transport,
        *,
        ttl: float = 60.0,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transport = transport
        self._ttl = ttl
        self._max_entries = max_entries
        self._clock = clock
        self._verdicts: OrderedDict[str, tuple[float, HTTPStatus]] = OrderedDict()

    async def verdict(self, authorization: str | None, method: str, path: str) -> HTTPStatus:
        """OK, UNAUTHORIZED (401), FORBIDDEN (403), or INTERNAL_SERVER_ERROR when the API
        server could not be asked."""
        token = _bearer(authorization)
        if token is None:
            return HTTPStatus.UNAUTHORIZED
        verb = VERBS.get(method.upper(), method.lower())
        key = hashlib.sha256(f"{verb}\0{path}\0{token}".encode()).hexdigest()
        now = self._clock()
        cached = self._verdicts.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            status = await self._review(token, verb, path)
        except (ApiError, ApiUnreachable) as exc:
            log.warning("cannot check a metrics scraper's token with the API server: %s", exc)
            return HTTPStatus.INTERNAL_SERVER_ERROR
        self._verdicts.pop(key, None)
        self._verdicts[key] = (now + self._ttl, status)
        while len(self._verdicts) > self._max_entries:
            self._verdicts.popitem(last=False)
        return status

    async def _review(self, token: str, verb: str, path: str) -> HTTPStatus:
        status = await self._ask(
            TOKEN_REVIEWS, "authentication.k8s.io/v1/TokenReview", {"token": token}
        )
        if not status.get("authenticated"):
            log.debug("metrics scrape refused: token not authenticated (%s)", status.get("error"))
            return HTTPStatus.UNAUTHORIZED
        user = status.get("user") or {}
        spec = {
            "user": user.get("username", ""),
            "groups": user.get("groups") or [],
            "uid": user.get("uid", ""),
            "extra": user.get("extra") or {},
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if (
            await self._ask(ACCESS_REVIEWS, "authorization.k8s.io/v1/SubjectAccessReview", spec)
        ).get("allowed"):
            return HTTPStatus.OK
        log.debug("metrics scrape refused: %s may not %s %s", spec["user"], verb, path)
        return HTTPStatus.FORBIDDEN

    async def _ask(self, path: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
        """POST a review (`kind` as group/version/Kind) and return its status."""
        api_version, _, kind_name = kind.rpartition("/")
        body = {"apiVersion": api_version, "kind": kind_name, "spec": spec}
        review = await self._transport.request("POST", path, body=body)
        status: dict[str, Any] = review.get("status") or {}
        return status


_TOKEN_REVIEW = "authentication.k8s.io/v1/TokenReview"
_ACCESS_REVIEW = "authorization.k8s.io/v1/SubjectAccessReview"


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
