"""The typed errors of the engine: what the API server answered, or that it did not.

A reconcile catches these by meaning (`NotFound`, `Conflict`, `ApiUnreachable`) rather than
by HTTP status; `TerminalError` tells the controller not to retry.
"""

from reconciler._exceptions import (
    AlreadyExists,
    ApiError,
    ApiUnreachable,
    BadRequest,
    CacheSyncTimeout,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    LeaderElectionLost,
    NotCached,
    NotFound,
    ReconcilerError,
    ServerError,
    TerminalError,
    TooManyRequests,
    Unauthorized,
    UnknownKind,
)

__all__ = [
    "AlreadyExists",
    "ApiError",
    "ApiUnreachable",
    "BadRequest",
    "CacheSyncTimeout",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "LeaderElectionLost",
    "NotCached",
    "NotFound",
    "ReconcilerError",
    "ServerError",
    "TerminalError",
    "TooManyRequests",
    "Unauthorized",
    "UnknownKind",
]
