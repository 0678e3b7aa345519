"""CpuCredit: what a paced request may spend at once, and how long it then waits."""

from __future__ import annotations

import pytest

from reconciler._pacing import CpuCredit, paced_interval


def test_without_a_burst_the_wait_is_the_plain_rule() -> None:
    credit = CpuCredit(share=0.02, burst=0.0)
    assert credit.spend(0.0, 0.004) == pytest.approx(0.2)
    assert credit.spend(0.2, 0.004) == pytest.approx(0.2)
    assert paced_interval(0.004, minimum=0.0, share=0.02, maximum=10.0) == pytest.approx(0.2)


def test_quiet_time_earns_credit_up_to_the_burst() -> None:
    credit = CpuCredit(share=0.02, burst=0.01)
    # A fresh request has the whole burst: two 4 ms runs go through at once.
    assert credit.spend(0.0, 0.004) == 0.0
    assert credit.spend(0.0, 0.004) == 0.0
    # The third overdraws by 2 ms: 0.1 s at 2% of a core.
    assert credit.spend(0.0, 0.004) == pytest.approx(0.1)
    # A long quiet spell earns the burst back, never more.
    assert credit.spend(100.0, 0.004) == 0.0
    assert credit.spend(100.0, 0.004) == 0.0
    assert credit.spend(100.0, 0.004) == pytest.approx(0.1)


def test_debt_cut_short_by_a_maximum_is_not_carried() -> None:
    credit = CpuCredit(share=0.001, burst=0.0)
    assert credit.spend(0.0, 0.05) == pytest.approx(50.0)
    # Run again after 2 s (a maximum interval): the next wait is its own cost's, no more.
    assert credit.spend(2.0, 0.05) == pytest.approx(50.0)
