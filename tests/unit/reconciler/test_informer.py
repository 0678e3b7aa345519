"""The informer's bookkeeping: which handler calls a list or an event causes.

The reflector feeding it is exercised against a real API server in the integration tests;
here the informer is driven directly, as its reflector would.
"""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import GVK, Informer, ObjectKey
from reconciler.lowlevel import RESTMapper, Transport

pytestmark = pytest.mark.unit

CM = GVK("", "v1", "ConfigMap")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: Any) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(("update", new["metadata"]["name"]))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


class Broken:
    def on_add(self, obj: Any) -> None:
        raise RuntimeError("boom")

    on_update = on_delete = on_add  # type: ignore[assignment]


def cm(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, **extra},
    }


class _NoApi:
    configuration = type("C", (), {"host": "https://unused"})()


def make_informer() -> Informer:
    transport = Transport(_NoApi())
    return Informer(transport, RESTMapper(transport), CM)


def test_relist_delivers_adds_changes_and_missed_deletes() -> None:
    informer = make_informer()
    rec = Recorder()
    informer.add_handler(rec)
    informer.replace([cm("a", "1"), cm("b", "1"), cm("c", "1")], "10")
    assert informer.has_synced
    rec.events.clear()
    # While we were not watching: a changed, b deleted, d created, c untouched.
    informer.replace([cm("a", "2"), cm("c", "1"), cm("d", "3")], "20")
    assert sorted(rec.events) == [("add", "d"), ("delete", "b"), ("update", "a")]
    assert informer.store.get(ObjectKey("ns", "b")) is None


def test_watch_events_map_to_handler_calls() -> None:
    informer = make_informer()
    rec = Recorder()
    informer.add_handler(rec)
    informer.replace([], "1")
    informer.on_watch_event("ADDED", cm("a", "2"))
    informer.on_watch_event("MODIFIED", cm("a", "3"))
    informer.on_watch_event("MODIFIED", cm("b", "4"))  # never seen: an add for us
    informer.on_watch_event("DELETED", cm("a", "5"))
    assert rec.events == [("add", "a"), ("update", "a"), ("add", "b"), ("delete", "a")]


def test_a_failing_handler_does_not_stop_the_others() -> None:
    informer = make_informer()
    rec = Recorder()
    informer.add_handler(Broken())
    informer.add_handler(rec)
    informer.on_watch_event("ADDED", cm("a", "1"))
    informer.on_watch_event("MODIFIED", cm("a", "2"))
    assert rec.events == [("add", "a"), ("update", "a")]


def test_late_handler_hears_about_cached_objects() -> None:
    informer = make_informer()
    informer.replace([cm("a", "1"), cm("b", "1")], "5")
    rec = Recorder()
    informer.add_handler(rec)
    assert sorted(rec.events) == [("add", "a"), ("add", "b")]


def test_cached_objects_are_trimmed() -> None:
    informer = make_informer()
    informer.on_watch_event("ADDED", cm("a", "1", managedFields=[{"manager": "x"}]))
    cached = informer.store.get(ObjectKey("ns", "a"))
    assert cached is not None
    assert "managedFields" not in cached["metadata"]
