"""Two managers, one Lease: only the leader reconciles, and a standby takes over.

Lease timings are shortened (3 s lease, 2 s renew deadline, 0.5 s retry) so the test is
quick; the waits below are hang guards, not statements about speed.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler import GVK, LeaderElectionConfig, Manager, Request, Result
from reconciler.errors import LeaderElectionLost
from tests.polling import eventually

from .conftest import CONFIGMAP, Kit, configmap

pytestmark = pytest.mark.integration

LEASE = GVK("coordination.k8s.io", "v1", "Lease")


def make_manager(
    api_client: Any, namespace: str, identity: str, reconciled: list[tuple[str, str]]
) -> Manager:
    mgr = Manager(
        api_client,
        field_manager=f"tests-{identity}",
        bind_address=None,
        leader_election=LeaderElectionConfig(
            name="tests-leader",
            namespace=namespace,
            identity=identity,
            lease_duration=3,
            renew_deadline=2,
            retry_period=0.5,
        ),
    )

    async def reconcile(request: Request) -> Result | None:
        assert mgr.is_leader, "only the leader reconciles"
        reconciled.append((identity, request.name))
        return None

    mgr.controller("cms", reconcile).watch(mgr.informer(CONFIGMAP, namespace=namespace))
    return mgr


async def test_standby_takes_over_when_the_leader_dies(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    reconciled: list[tuple[str, str]] = []
    a = make_manager(api_client, namespace, "a", reconciled)
    b = make_manager(api_client, namespace, "b", reconciled)
    run_a = asyncio.create_task(a.run())
    await eventually(lambda: a.is_leader, "a leads")
    run_b = asyncio.create_task(b.run())
    try:
        await eventually(lambda: b.ready, "standby caches synced")
        assert not b.is_leader

        await kit.client.apply(configmap("one", namespace))
        await eventually(lambda: ("a", "one") in reconciled, "leader reconciles")
        assert not any(who == "b" for who, _ in reconciled)

        # The leader dies: no graceful release, its lease must run out.
        run_a.cancel()
        await asyncio.gather(run_a, return_exceptions=True)
        await eventually(lambda: b.is_leader, "standby takes over")
        lease = await kit.client.get_live(LEASE, "tests-leader", namespace)
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] >= 1

        await kit.client.apply(configmap("two", namespace))
        await eventually(lambda: ("b", "two") in reconciled, "new leader reconciles")

        # A graceful stop hands the lease back at once.
        b.stop()
        await asyncio.wait_for(run_b, 60)
        lease = await kit.client.get_live(LEASE, "tests-leader", namespace)
        assert lease["spec"]["holderIdentity"] == ""
    finally:
        for task in (run_a, run_b):
            task.cancel()
        await asyncio.gather(run_a, run_b, return_exceptions=True)


async def test_leader_exits_when_it_cannot_keep_its_lease(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    reconciled: list[tuple[str, str]] = []
    a = make_manager(api_client, namespace, "a", reconciled)
    run_a = asyncio.create_task(a.run())
    try:
        await eventually(lambda: a.is_leader, "a leads")
        # Someone else takes the lease (as after a long pause of ours); we must step down.
        lease = await kit.client.get_live(LEASE, "tests-leader", namespace)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease["spec"].update(holderIdentity="intruder", leaseDurationSeconds=3600, renewTime=stamp)
        await kit.client.update(lease)
        with pytest.raises(LeaderElectionLost):
            await asyncio.wait_for(run_a, 60)
        assert not a.is_leader
        assert all(not c.started for c in a.controllers)
    finally:
        run_a.cancel()
        await asyncio.gather(run_a, return_exceptions=True)
