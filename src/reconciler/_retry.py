"""Retrying a request that failed for a reason that usually goes away by itself.

An API server restarting, a connection reset, 429 from priority-and-fairness, a 503: the
same request a moment later normally succeeds. Everything else (a conflict, an invalid
object) would fail the same way again and is raised at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from reconciler._exceptions import ApiUnreachable, ServerError, TooManyRequests

log = logging.getLogger("reconciler.retry")

T = TypeVar("T")

TRANSIENT: tuple[type[Exception], ...] = (ApiUnreachable, ServerError, TooManyRequests)
"""Errors worth sending the same request again for."""


class _Wait:
    """Exponential with jitter (0.2 s, 0.4 s, ... 5 s), never sooner than Retry-After."""

    def __init__(self) -> None:
        self._exp = wait_exponential_jitter(multiplier=0.2, max=5.0, jitter=0.2)

    def __call__(self, state: RetryCallState) -> float:
        delay = float(self._exp(state))
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        return max(delay, float(retry_after)) if retry_after else delay


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    log.debug("retrying after attempt %d: %s", state.attempt_number, exc)


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int = 5,
    retry_on: Iterable[type[Exception]] = TRANSIENT,
) -> T:
    """`await call()`, again after a transient failure, up to `attempts` times in all."""
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(tuple(retry_on)),
        stop=stop_after_attempt(attempts),
        wait=_Wait(),
        reraise=True,
        before_sleep=_log_retry,
    )
    async for attempt in retrying:
        with attempt:
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover
