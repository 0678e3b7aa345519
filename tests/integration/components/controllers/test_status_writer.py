"""A policy's status as the API server ends up storing it, written through `StatusWriter`
by a real client: read-your-writes over a cache that lags, paced progress, a part of the
status that goes (a merge patch's null deletes it), and the Events a `kubectl describe`
shows for readiness changes.

No operator runs here: the writer is driven directly, with the cached copy a reconcile
would have read, so each step's staleness is the test's choice, not the watch's timing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import DriverUpgradePolicySpec, NodeAgentStatus
from components.controllers._status import Findings, OperandReadiness, policy_status
from components.controllers._status_writer import StatusWriter
from components.preflight import Check, Verdict, gate
from components.upgrade._preflight import AdmissionPreflight
from components.upgrade._reader import Pool
from gpusim import apply_crds, load_documents
from reconciler import EventRecorder, Object
from tests.integration.components.controllers.conftest import CLUSTER_POLICY, EVENT, REPO
from tests.integration.reconciler.conftest import Kit


class Writer(Kit):
    """The engine's test kit, an Event recorder and the status writer, on one ClusterPolicy."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api)
        self.recorder = EventRecorder(self.client, "gpu-operator")
        self.status = StatusWriter(
            self.client, self.recorder, CLUSTER_POLICY, report_ready_changes=True
        )
        self.name = f"status-{uuid.uuid4().hex[:6]}"

    async def stored(self) -> Object:
        return await self.client.get_live(CLUSTER_POLICY, self.name)

    async def events(self) -> list[tuple[str, str, int]]:
        """(type, reason, count) of the Events about the policy."""
        out = []
        for e in await self.client.list_live(EVENT, namespace="default"):
            if (e.get("involvedObject") or {}).get("name") == self.name:
                out.append((e["type"], e["reason"], int(e.get("count") or 1)))
        return sorted(out)


@pytest.fixture
async def writer(api_client: client.ApiClient) -> AsyncIterator[Writer]:
    await apply_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    w = Writer(api_client)
    await w.client.create(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": w.name}}
    )
    try:
        yield w
    finally:
        await w.client.delete(CLUSTER_POLICY, w.name, missing_ok=True)
        await w.cache.stop()


def status(
    *, driver_ready: bool, plugin_nodes_ready: int = 3, node_agent: NodeAgentStatus | None = None
) -> Any:
    operands = [
        OperandReadiness("state-driver", enabled=True, ready=driver_ready),
        OperandReadiness(
            "state-device-plugin",
            enabled=True,
            ready=plugin_nodes_ready == 3,
            nodes_desired=3,
            nodes_ready=plugin_nodes_ready,
        ),
    ]
    found = Findings(
        namespace="gpu-operator",
        generation=1,
        operands=operands,
        gpu_nodes=3,
        node_agent=node_agent,
    )
    return policy_status(None, found)


async def test_a_status_back_to_what_a_stale_cached_copy_shows_reaches_the_server(
    writer: Writer,
) -> None:
    await writer.status.write(await writer.stored(), status(driver_ready=True))
    cached = await writer.stored()  # what the cache holds from here on: ready
    assert cached["status"]["state"] == "ready"

    # A new driver DaemonSet: notReady is written; the cache has not heard of it yet.
    await writer.status.write(cached, status(driver_ready=False))
    assert (await writer.stored())["status"]["state"] == "notReady"

    # The driver rolls out before the watch brings our write: the reconcile computes the
    # very status the stale copy shows. Judged against that copy, nothing would be written
    # and the server would say notReady for good.
    await writer.status.write(cached, status(driver_ready=True))
    assert (await writer.stored())["status"]["state"] == "ready"

    # Each change of readiness is an Event (the two alike as one, counted twice).
    counts: dict[str, int] = {}
    for kind, _, count in await writer.events():
        counts[kind] = counts.get(kind, 0) + count
    assert counts == {"Normal": 2, "Warning": 1}


async def test_an_unchanged_status_is_not_written_again(writer: Writer) -> None:
    await writer.status.write(await writer.stored(), status(driver_ready=False))
    current = await writer.stored()
    version = current["metadata"]["resourceVersion"]

    await writer.status.write(current, status(driver_ready=False))

    assert (await writer.stored())["metadata"]["resourceVersion"] == version
    assert len(await writer.events()) == 1


async def test_progress_alone_waits_its_turn_and_a_milestone_does_not(writer: Writer) -> None:
    await writer.status.write(
        await writer.stored(), status(driver_ready=False, plugin_nodes_ready=1)
    )
    first = await writer.stored()

    # One more device-plugin pod ready: progress only, and too soon after the last write.
    wait = await writer.status.write(
        first, status(driver_ready=False, plugin_nodes_ready=2), progress_every=30.0
    )
    assert wait is not None and 0 < wait <= 30.0
    stored = await writer.stored()
    assert stored["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]

    # The driver turns ready: the operand's state changed, which goes at once.
    wait = await writer.status.write(
        first, status(driver_ready=True, plugin_nodes_ready=2), progress_every=30.0
    )
    assert wait is None
    components = {c["name"]: c for c in (await writer.stored())["status"]["components"]}
    assert components["state-driver"]["state"] == "ready"
    assert components["state-device-plugin"]["nodesReady"] == 2

    # With a short pace, progress goes once its time has passed.
    await asyncio.sleep(0.3)
    wait = await writer.status.write(
        await writer.stored(), status(driver_ready=True, plugin_nodes_ready=1), progress_every=0.2
    )
    assert wait is None
    components = {c["name"]: c for c in (await writer.stored())["status"]["components"]}
    assert components["state-device-plugin"]["nodesReady"] == 1


async def test_once_the_cache_has_caught_up_it_is_read_again(writer: Writer) -> None:
    cached = await writer.stored()
    await writer.status.write(cached, status(driver_ready=False))

    # The watch brings our write, then someone else's (a label): the cache is newest.
    await writer.client.patch(
        CLUSTER_POLICY, writer.name, {"metadata": {"labels": {"edited": "by-someone"}}}
    )
    newer = await writer.stored()
    assert writer.status.latest(newer) is newer
    # And what our write returned is forgotten, even for an older copy seen later.
    assert writer.status.latest(cached) is cached
    # Nothing to write: the cache's copy already says notReady.
    await writer.status.write(newer, status(driver_ready=False))
    stored = await writer.stored()
    assert stored["metadata"]["resourceVersion"] == newer["metadata"]["resourceVersion"]


async def test_a_part_that_goes_is_gone_from_the_server(writer: Writer) -> None:
    """The node agent switched off: its summary leaves the status. The writer sends
    `nodeAgent: null`, and the API server deletes the field (a JSON merge patch, RFC 7386),
    so the next reconcile's same status is unchanged and writes nothing. (The unit test's
    fake server kept the field: there the writer saw a change, and wrote, every reconcile.)"""
    agent = NodeAgentStatus(nodes=3)
    await writer.status.write(await writer.stored(), status(driver_ready=True, node_agent=agent))
    assert (await writer.stored())["status"]["nodeAgent"]["nodes"] == 3

    await writer.status.write(await writer.stored(), status(driver_ready=True))
    stored = await writer.stored()
    assert "nodeAgent" not in stored["status"]
    assert stored["status"]["state"] == "ready"

    await writer.status.write(stored, status(driver_ready=True))
    again = await writer.stored()
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]


async def test_preflight_condition_survives_the_policy_own_writes_with_no_re_add(
    writer: Writer,
) -> None:
    """Pre-flight's `PreflightFailed` goes through the policy's writer (as the operator wires
    it): the policy's next status write, judged against a cached copy that has not seen the
    condition, keeps it, so pre-flight never has to write it again; a new message with the
    same status keeps its `lastTransitionTime`."""
    sunk: list[Mapping[str, Any]] = []

    async def sink(obj: Object, condition: Mapping[str, Any]) -> None:
        sunk.append(condition)
        await writer.status.write_condition(obj, condition)

    seam = AdmissionPreflight(None, writer.client, writer.recorder, condition_sink=sink)  # type: ignore[arg-type]
    await writer.status.write(await writer.stored(), status(driver_ready=True))
    cached = await writer.stored()  # the cache stays here: it never sees pre-flight's write

    def pool(obj: Object) -> Pool:
        return Pool("ClusterPolicy", writer.name, obj, DriverUpgradePolicySpec(), True)

    missing = gate({"r1": RHEL}, {RHEL: Check(RHEL, Verdict.MISSING)}, "Warn")
    seam._report(pool(cached), missing)
    await _settle(seam)
    first = _preflight(await writer.stored())
    assert first is not None and first["reason"] == "ImageMissing"

    # The policy's own write, from the stale copy: a change of readiness.
    await writer.status.write(cached, status(driver_ready=False))
    stored = await writer.stored()
    assert stored["status"]["state"] == "notReady"
    assert _preflight(stored) == first

    # Pre-flight looks again at what is stored: nothing to write.
    seam._report(pool(stored), missing)
    await _settle(seam)
    assert len(sunk) == 1

    # One more node needs the missing image: a new message, the same status and time.
    await asyncio.sleep(1.1)  # lastTransitionTime has a resolution of one second
    wider = gate({"r1": RHEL, "r2": RHEL}, {RHEL: Check(RHEL, Verdict.MISSING)}, "Warn")
    seam._report(pool(await writer.stored()), wider)
    await _settle(seam)
    await writer.status.write(cached, status(driver_ready=True))
    last = _preflight(await writer.stored())
    assert last is not None and "r2" in last["message"]
    assert last["lastTransitionTime"] == first["lastTransitionTime"]


RHEL = "127.0.0.1:5000/nvidia/driver:590.48.01-rhel9"


def _preflight(obj: Object) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PreflightFailed":
            return dict(c)
    return None


async def _settle(seam: AdmissionPreflight) -> None:
    while seam._tasks:
        await asyncio.gather(*seam._tasks)
