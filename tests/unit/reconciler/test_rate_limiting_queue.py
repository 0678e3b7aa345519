"""Retries: a failing key comes back later and later; forgetting resets it."""

from __future__ import annotations

import asyncio

import pytest

from reconciler.lowlevel import FakeClock, ItemExponentialFailureRateLimiter, RateLimitingQueue

pytestmark = pytest.mark.unit


def test_add_rate_limited_backs_off_and_forget_resets() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(1.0, 100.0), clock=clock
    )
    q.add_rate_limited("a")  # 1 s
    clock.advance(0.5)
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()
    clock.advance(0.5)
    assert q.get_nowait() == "a"
    q.done("a")
    q.add_rate_limited("a")  # 2 s now
    clock.advance(1.5)
    assert len(q) == 0
    clock.advance(0.5)
    assert len(q) == 1
    assert q.num_requeues("a") == 2
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert len(q) == 1, "forget does not remove a queued key"


def test_default_limiter_first_retry_is_quick() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    q.add_rate_limited("a")
    clock.advance(0.005)
    assert q.get_nowait() == "a"
