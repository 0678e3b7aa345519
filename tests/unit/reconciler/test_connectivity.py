"""One WARNING per API server outage for all informers, one INFO on its return."""

from __future__ import annotations

import logging

import pytest

from reconciler.lowlevel import Connectivity

pytestmark = pytest.mark.unit


def test_an_outage_is_said_once_repeated_slowly_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    tracker = Connectivity(repeat_every=30.0, clock=lambda: now[0])
    returned: list[float] = []
    tracker.on_restored(lambda: returned.append(now[0]))
    caplog.set_level(logging.DEBUG, logger="reconciler.connectivity")
    cause = ConnectionRefusedError("connect call failed")

    for second in range(61):  # three informers retrying every second for a minute
        now[0] = 100.0 + second
        for informer in ("pods", "nodes", "daemonsets"):
            tracker.lost(informer, cause)
    assert tracker.down and tracker.down_for == 60.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings  # at 0 s, 30 s and 60 s
    assert "connect call failed" in warnings[0]

    tracker.restored("pods")
    tracker.restored("nodes")
    assert tracker.down and not returned, "back only when every informer is"
    tracker.restored("daemonsets")
    assert not tracker.down and tracker.down_for == 0.0
    assert returned == [160.0]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["API server reachable again after 60.0s; catching up"]


def test_a_stopped_informer_does_not_keep_an_outage_open() -> None:
    tracker = Connectivity()
    calls: list[int] = []
    tracker.on_restored(lambda: calls.append(1))
    tracker.lost("pods", OSError("reset"))
    tracker.forget("pods")
    assert not tracker.down and calls == []
    tracker.restored("pods")  # never lost since: nothing to say
    assert calls == []
