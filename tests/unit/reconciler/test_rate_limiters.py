"""client-go's default controller rate limiter, by the numbers."""

from __future__ import annotations

import pytest

from reconciler.lowlevel import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)

pytestmark = pytest.mark.unit


def test_exponential_doubles_from_5ms_per_key_and_caps_at_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[-1] == 1000
    assert max(delays) == 1000
    assert limiter.when("b") == 0.005, "failures are counted per key"
    assert limiter.num_requeues("a") == 20


def test_exponential_never_overflows() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000)
    for _ in range(5000):
        assert limiter.when("a") <= 1000


def test_forget_resets_a_key() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    for _ in range(5):
        limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_bucket_allows_a_burst_then_holds_to_the_rate() -> None:
    clock = FakeClock()
    bucket = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)
    clock.advance(10)  # refills (up to the burst)
    assert bucket.when("z") == 0.0


def test_default_is_the_longer_of_both() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock)
    assert isinstance(limiter, MaxOfRateLimiter)
    assert limiter.when("a") == 0.005
    for i in range(200):
        limiter.when(f"k{i}")  # empties the bucket
    assert limiter.when("b") > 1.0, "the bucket dominates once empty"
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
