"""A manager end to end: probes and metrics, status conflicts, graceful SIGTERM."""

from __future__ import annotations

import asyncio
import copy
import gc
import os
import signal
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from reconciler import Manager, Request, Result
from reconciler.errors import Conflict
from tests.polling import eventually

from .conftest import CONFIGMAP, WIDGET, Kit, configmap, ensure_widget_crd

pytestmark = pytest.mark.integration

DESIGN_METRICS = {
    # name in DESIGN 2.1 -> (family name as parsed, metric type)
    "controller_runtime_reconcile_total": ("controller_runtime_reconcile", "counter"),
    "controller_runtime_reconcile_errors_total": (
        "controller_runtime_reconcile_errors",
        "counter",
    ),
    "controller_runtime_reconcile_time_seconds": (
        "controller_runtime_reconcile_time_seconds",
        "histogram",
    ),
    "controller_runtime_active_workers": ("controller_runtime_active_workers", "gauge"),
    "controller_runtime_max_concurrent_reconciles": (
        "controller_runtime_max_concurrent_reconciles",
        "gauge",
    ),
    "workqueue_depth": ("workqueue_depth", "gauge"),
    "workqueue_adds_total": ("workqueue_adds", "counter"),
    "workqueue_queue_duration_seconds": ("workqueue_queue_duration_seconds", "histogram"),
    "workqueue_work_duration_seconds": ("workqueue_work_duration_seconds", "histogram"),
    "workqueue_retries_total": ("workqueue_retries", "counter"),
    "workqueue_unfinished_work_seconds": ("workqueue_unfinished_work_seconds", "gauge"),
    "workqueue_longest_running_processor_seconds": (
        "workqueue_longest_running_processor_seconds",
        "gauge",
    ),
}


async def run_in_background(mgr: Manager) -> asyncio.Task[None]:
    task = asyncio.create_task(mgr.run())
    await eventually(lambda: mgr.is_leader or task.done(), "manager started")
    if task.done():
        task.result()
    return task


async def stop(mgr: Manager, task: asyncio.Task[None]) -> None:
    mgr.stop()
    try:
        await asyncio.wait_for(task, 60)
    finally:
        task.cancel()


async def test_metrics_and_probes_are_served(api_client: Any, kit: Kit, namespace: str) -> None:
    registry = CollectorRegistry()
    mgr = Manager(api_client, field_manager="tests", bind_address="127.0.0.1:0", registry=registry)
    done: set[str] = set()

    async def reconcile(request: Request) -> Result | None:
        done.add(request.name)
        return None

    mgr.controller("cms", reconcile, max_concurrent_reconciles=3).watch(
        mgr.informer(CONFIGMAP, namespace=namespace)
    )
    task = await run_in_background(mgr)
    try:
        for i in range(5):
            await kit.client.apply(configmap(f"cm{i}", namespace))
        await eventually(lambda: len(done) == 5, "five reconciles")
        base = f"http://127.0.0.1:{mgr.http_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/healthz") as resp:
                assert resp.status == 200
            async with http.get(base + "/readyz") as resp:
                assert resp.status == 200
            async with http.get(base + "/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
    finally:
        await stop(mgr, task)

    families = {f.name: f for f in text_string_to_metric_families(text)}
    for design_name, (family, kind) in DESIGN_METRICS.items():
        assert family in families, f"{design_name} is not exported"
        assert families[family].type == kind, design_name
    samples = [s for f in families.values() for s in f.samples]

    def value(sample_name: str, **labels: str) -> float:
        return sum(
            s.value
            for s in samples
            if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    assert value("controller_runtime_reconcile_total", controller="cms", result="success") >= 5
    assert value("controller_runtime_max_concurrent_reconciles", controller="cms") == 3
    assert value("workqueue_adds_total", name="cms", controller="cms") >= 5
    assert value("workqueue_work_duration_seconds_count", name="cms") >= 5
    assert value("controller_runtime_reconcile_time_seconds_count", controller="cms") >= 5
    # The manager's own requests: the informer's list and watch (its writes went elsewhere).
    assert value("rest_client_requests_total", method="GET", code="200") >= 1
    assert value("rest_client_requests_total", method="WATCH", code="200") >= 1
    assert value("rest_client_requests_total", method="PATCH") == 0


async def test_status_write_conflict_is_retried_by_a_requeue(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    await ensure_widget_crd(kit)
    mgr = Manager(api_client, field_manager="tests", bind_address=None)
    conflicts: list[str] = []
    interfered = False

    async def reconcile(request: Request) -> Result | None:
        nonlocal interfered
        cached = mgr.client.get(WIDGET, request.name, request.namespace)
        if cached is None:
            return None
        widget = copy.deepcopy(cached)
        want = widget["spec"]["value"]
        if (widget.get("status") or {}).get("observed") == want:
            return None
        if not interfered:
            # Someone else writes between our read and our write: our copy is now stale.
            interfered = True
            await mgr.client.patch(
                WIDGET,
                request.name,
                {"metadata": {"labels": {"touched": "yes"}}},
                namespace=request.namespace,
            )
        widget["status"] = {"observed": want}
        try:
            await mgr.client.update_status(widget)
        except Conflict as exc:
            conflicts.append(exc.message)
            raise
        return None

    mgr.controller("widgets", reconcile).watch(mgr.informer(WIDGET, namespace=namespace))
    task = await run_in_background(mgr)
    try:
        await kit.client.apply(
            {
                "apiVersion": "test.reconciler.dev/v1",
                "kind": "Widget",
                "metadata": {"name": "w", "namespace": namespace},
                "spec": {"value": 7},
            }
        )

        def observed() -> Any:
            cached = mgr.client.get(WIDGET, "w", namespace) or {}
            return (cached.get("status") or {}).get("observed")

        await eventually(lambda: observed() == 7, "status written after the conflict")
        assert conflicts, "the first status write must have conflicted"
        assert "modified" in conflicts[0]
        errors = mgr.registry.get_sample_value(
            "controller_runtime_reconcile_errors_total", {"controller": "widgets"}
        )
        assert errors is not None and errors >= 1
    finally:
        await stop(mgr, task)


async def test_sigterm_lets_the_reconcile_in_flight_finish(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    mgr = Manager(api_client, field_manager="tests", bind_address=None, handle_signals=True)
    started = asyncio.Event()
    release = asyncio.Event()
    finished: list[str] = []

    async def reconcile(request: Request) -> Result | None:
        started.set()
        await release.wait()
        finished.append(request.name)
        return None

    mgr.controller("cms", reconcile).watch(mgr.informer(CONFIGMAP, namespace=namespace))
    previous = signal.getsignal(signal.SIGTERM)
    task = await run_in_background(mgr)
    try:
        await kit.client.apply(configmap("slow", namespace))
        await asyncio.wait_for(started.wait(), 60)
        os.kill(os.getpid(), signal.SIGTERM)
        await eventually(lambda: mgr.stopping, "SIGTERM noticed")
        assert not task.done(), "the manager waits for the reconcile in flight"
        release.set()
        await asyncio.wait_for(task, 60)
        assert finished == ["slow"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert signal.getsignal(signal.SIGTERM) == previous, "the test runner's handler is back"


async def test_sigterm_deadline_cancels_a_stuck_reconcile(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    mgr = Manager(api_client, field_manager="tests", bind_address=None, shutdown_timeout=0.2)
    started = asyncio.Event()
    cancelled: list[str] = []

    async def reconcile(request: Request) -> Result | None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(request.name)
            raise
        return None

    mgr.controller("cms", reconcile).watch(mgr.informer(CONFIGMAP, namespace=namespace))
    task = await run_in_background(mgr)
    await kit.client.apply(configmap("stuck", namespace))
    await asyncio.wait_for(started.wait(), 60)
    await stop(mgr, task)
    assert cancelled == ["stuck"]


def in_collector_walks(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


@pytest.fixture
def unfrozen_heap() -> Iterator[None]:
    """The freeze is process-wide: give the objects back to the collector after the test."""
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("freeze", [True, False])
async def test_a_manager_freezes_what_its_synced_caches_hold_only_when_asked(
    api_client: Any, kit: Kit, namespace: str, unfrozen_heap: None, freeze: bool
) -> None:
    """The operator's process asks (`gpu-operator run`): the collector then no longer walks
    the first listing on each collection. A manager built without asking leaves the heap to
    the process that embeds it."""
    await kit.client.apply(configmap("listed", namespace, key="value"))
    mgr = Manager(
        api_client, field_manager="tests", bind_address=None, freeze_heap_after_sync=freeze
    )

    async def reconcile(request: Request) -> None:
        return None

    mgr.controller("cms", reconcile).watch(mgr.informer(CONFIGMAP, namespace=namespace))
    task = await run_in_background(mgr)
    try:
        listed = mgr.cache.get(CONFIGMAP, "listed", namespace)
        assert listed is not None and gc.is_tracked(listed)
        assert in_collector_walks(listed) is not freeze
        assert (gc.get_freeze_count() > 0) is freeze
        # What arrives after the sync is the collector's as usual.
        await kit.client.apply(configmap("watched", namespace, key="value"))
        await eventually(
            lambda: mgr.cache.get(CONFIGMAP, "watched", namespace) is not None, "watched"
        )
        assert in_collector_walks(mgr.cache.get(CONFIGMAP, "watched", namespace))
    finally:
        await stop(mgr, task)
