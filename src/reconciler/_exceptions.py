"""Every exception the engine raises, in one place.

Callers branch on the type, never on message text: a `Conflict` means "read again and
retry", an `Invalid` means "the object we rendered is wrong", a `NotFound` is often fine.
Each API error keeps the server's own message, because that is what a person needs to read.
"""

from __future__ import annotations

import json
from typing import Any


class ReconcilerError(Exception):
    """Base of everything raised by `reconciler`."""


class ShutDown(ReconcilerError):
    """The work queue was shut down and has nothing left to hand out."""


class NotCached(ReconcilerError):
    """A cached read for a kind that has no informer: register one, don't list the server."""


class CacheSyncTimeout(ReconcilerError):
    """Informers did not finish their first list in time."""


class LeaderElectionLost(ReconcilerError):
    """This process stopped being the leader; it must exit so that a standby takes over."""


class TerminalError(ReconcilerError):
    """Raised by a reconcile to say that retrying cannot help: logged and counted, not requeued."""


class UnknownKind(ReconcilerError):
    """The API server does not serve this group/version/kind (a missing CRD, a typo)."""


class ApiUnreachable(ReconcilerError):
    """No answer from the API server: connection refused or reset, or a timeout."""


class ApiError(ReconcilerError):
    """The API server answered with an error status.

    `message` is the server's `Status.message`, verbatim; `reason` its machine-readable
    `Status.reason` (e.g. `Conflict`, `Invalid`); `details` its `Status.details`.
    """

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        details: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.retry_after = retry_after
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")


class BadRequest(ApiError):
    """400: the request itself was malformed."""


class Unauthorized(ApiError):
    """401: the credentials were not accepted."""


class Forbidden(ApiError):
    """403: RBAC said no; usually a missing rule in config/rbac."""


class NotFound(ApiError):
    """404: the object (or the kind) does not exist."""


class Conflict(ApiError):
    """409 Conflict: our resourceVersion was stale, or another field manager owns a field."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: a create for a name that is taken."""


class Gone(ApiError):
    """410: the resourceVersion we asked for was compacted away; relist."""


class Invalid(ApiError):
    """422: the object failed validation; the message names the offending fields."""


class TooManyRequests(ApiError):
    """429: throttled (API priority and fairness), or an eviction refused by a PDB."""


class ServerError(ApiError):
    """5xx: the server failed; transient more often than not."""


_BY_REASON: dict[str, type[ApiError]] = {
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Invalid": Invalid,
    "NotFound": NotFound,
    "Gone": Gone,
    "Expired": Gone,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_status(
    status: int, body: bytes | dict[str, Any] | None, retry_after: float | None = None
) -> ApiError:
    """Build the typed error for an HTTP status and a (possibly non-JSON) Status body."""
    doc: dict[str, Any] = {}
    if isinstance(body, dict):
        doc = body
    elif body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            doc = parsed
        else:
            doc = {"message": body.decode("utf-8", "replace").strip()}
    reason = str(doc.get("reason") or "")
    message = str(doc.get("message") or "")
    details = doc.get("details") if isinstance(doc.get("details"), dict) else None
    code = int(doc.get("code") or status)
    cls = _BY_REASON.get(reason) or _BY_STATUS.get(code)
    if cls is None:
        cls = ServerError if code >= 500 else ApiError
    return cls(code, reason, message, details, retry_after)
