"""`bench/scale.py` reads from the API server's /metrics what it served in a run: requests,
watchers it closed, and the watch events and bytes it sent. Two runs of the same requests
that differ by one set of watchers must show that set's events and bytes."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.tools import REPO

METRICS = """\
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 7000
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 300
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="pods"} 4
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="pods",version="v1"} {pod_events}
apiserver_watch_events_total{group="apps",resource="daemonsets",version="v1"} 20
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="+Inf"} {pod_events}
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} {pod_bytes}
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} {pod_events}
"""


class _Metrics:
    def __init__(self, text: str) -> None:
        self.text = text

    async def request_bytes(self, method: str, path: str) -> bytes:
        assert (method, path) == ("GET", "/metrics")
        return self.text.encode()


def _served(pod_events: int, pod_bytes: int) -> _Metrics:
    text = METRICS.replace("{pod_events}", str(pod_events))
    return _Metrics(text.replace("{pod_bytes}", str(pod_bytes)))


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("scale")


async def test_a_run_with_one_more_watcher_shows_its_events_and_bytes(scale: ModuleType) -> None:
    before = await scale._apiserver_requests(_served(1000, 10_000_000))
    after = await scale._apiserver_requests(_served(1400, 14_200_000))
    assert before["WATCH EVENTS pods"] == 1000
    assert before["WATCH BYTES pods"] == 10_000_000
    assert before["TERMINATED watch pods"] == 4
    assert before["POST pods"] == 7000
    assert before["PATCH pods/status"] == 300
    served = scale._diff(after, before)
    assert served == {"WATCH BYTES pods": 4_200_000, "WATCH EVENTS pods": 400}
