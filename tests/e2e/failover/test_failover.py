"""Failover between two operator replicas: the leader killed (SIGKILL) mid-rollout and
mid-upgrade, ten times, then a leader frozen (SIGSTOP) until a standby took over and
thawed (SIGCONT).

What a user relies on: a standby takes over within the lease's protocol bound (the lease
duration after the leader's last renewal, plus one renew period, jittered, for the standby
to have seen that renewal); the old leader writes nothing once the new one holds the lease,
which the API server's audit log shows, write by write; the upgrade walk keeps its limits
across every handover; and the work completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from components.controllers import LEASE_NAME
from components.upgrade import STATE_LABEL
from reconciler import GVK, labels_of, name_of
from reconciler.errors import NotFound
from tests.e2e.operator._harness import NAMESPACE, OperatorProcess
from tests.e2e.upgrade.conftest import IN_PROGRESS_VALUES, Watch
from tests.e2e.upgrade.test_driver_upgrade import (
    CLUSTER_POLICY,
    DAEMONSET,
    POLICY,
    _rollout_done,
    _set_policy,
    _upgraded,
)
from tests.polling import eventually

from .conftest import LEASE_SECONDS, RETRY_SECONDS, AuditLog

LEASE = GVK("coordination.k8s.io", "v1", "Lease")
TAKEOVER_BOUND = LEASE_SECONDS + RETRY_SECONDS * 1.2
"""The lease duration after the last renewal, plus one (jittered, +20%) renew period in
which the standby may not yet have seen that renewal."""
SCHEDULING_SLACK = 0.5
"""For the standby's event loop on a loaded machine: its timer fires late, not early."""
ROLLOUT_KILLS = 5
UPGRADE_KILLS = 5
UPGRADE = {"autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": 1}
EXPORTER = "nvidia-node-status-exporter"


@dataclass(frozen=True)
class Handover:
    old: str
    new: str
    seconds: float
    """From the old leader's end (kill or freeze) to the new lease's acquireTime."""


@dataclass
class Replicas:
    """The replicas, restarted when they exit, as the kubelet restarts a pod."""

    processes: list[OperatorProcess]
    held: set[int] = field(default_factory=set)
    """Replicas (by index) the test handles itself: not restarted behind its back."""
    restarts: int = 0

    def holding(self, identity: str) -> OperatorProcess:
        for process in self.processes:
            ids = process.lease_identities()
            if ids and ids[-1] == identity and process.alive():
                return process
        raise AssertionError(f"no live replica holds the lease as {identity}")

    def others(self, process: OperatorProcess) -> list[OperatorProcess]:
        return [p for p in self.processes if p is not process]

    def restart_exited(self) -> None:
        for index, process in enumerate(self.processes):
            if index not in self.held and not process.alive():
                process.start()
                self.restarts += 1


@contextlib.asynccontextmanager
async def supervised(replicas: Replicas) -> AsyncIterator[None]:
    async def loop() -> None:
        while True:
            replicas.restart_exited()
            await asyncio.sleep(0.5)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _stamp(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def _holder(watch: Watch) -> dict[str, str]:
    try:
        lease = await watch.client.get_live(LEASE, LEASE_NAME, NAMESPACE)
    except NotFound:
        return {"holder": "", "acquired": ""}
    spec = lease.get("spec") or {}
    return {
        "holder": spec.get("holderIdentity") or "",
        "acquired": spec.get("acquireTime") or "",
    }


async def _ready_standby(replicas: Replicas, leader: OperatorProcess) -> None:
    """A warm standby (caches synced), so what follows is a takeover, not a start-up."""

    async def warm() -> bool:
        probes = [await asyncio.to_thread(p.probe, "/readyz") for p in replicas.others(leader)]
        return 200 in probes

    await eventually(warm, "a standby with synced caches", 90, interval=0.3)


async def _hand_over(
    watch: Watch,
    replicas: Replicas,
    end: Callable[[OperatorProcess], None],
    before: Callable[[], Awaitable[None]] | None = None,
) -> tuple[Handover, OperatorProcess]:
    """End the leader with `end` (after `before`, once a standby is warm) and wait for
    another replica to acquire the lease."""
    old = (await eventually(_holder_set(watch), "a leader", 90))["holder"]
    leader = replicas.holding(old)
    await _ready_standby(replicas, leader)
    if before is not None:
        await before()
    ended = time.time()
    end(leader)

    async def taken() -> dict[str, str] | None:
        now = await _holder(watch)
        return now if now["holder"] not in ("", old) else None

    lease = await eventually(taken, f"a replica takes over from {old}", LEASE_SECONDS * 6)
    return Handover(old, lease["holder"], _stamp(lease["acquired"]) - ended), leader


def _holder_set(watch: Watch) -> Callable[[], Awaitable[dict[str, str] | None]]:
    async def check() -> dict[str, str] | None:
        now = await _holder(watch)
        return now if now["holder"] else None

    return check


def _kill_and_restart(process: OperatorProcess) -> None:
    process.kill()  # returns once the process is gone
    process.start()  # the pod comes back, as a standby


async def _policy_ready(watch: Watch) -> None:
    async def ready() -> bool:
        cp = await watch.client.get_live(CLUSTER_POLICY, POLICY)
        status = cp.get("status") or {}
        return (
            status.get("state") == "ready"
            and status.get("observedGeneration") == cp["metadata"]["generation"]
        )

    await eventually(ready, "the ClusterPolicy ready for its latest generation", 240)


def _in_progress(watch: Watch) -> bool:
    return any(labels_of(n).get(STATE_LABEL) in IN_PROGRESS_VALUES for n in watch.gpu_nodes())


def _late_writes(audit: AuditLog, handovers: list[Handover]) -> list[str]:
    """Writes the API server accepted from an old leader after the new one's lease
    acquisition reached it."""
    writes = audit.writes()
    late = []
    for h in handovers:
        acquired = [
            w.received
            for w in writes
            if w.resource == "leases" and f"({h.new})" in w.user_agent and w.code < 300
        ]
        assert acquired, f"no lease write by {h.new} in the audit log"
        first = min(acquired)
        late += [
            f"{w.verb} {w.resource}/{w.name} ({w.code}) by {h.old} at {w.received}, "
            f"after {h.new} took the lease at {first}"
            for w in writes
            if f"({h.old})" in w.user_agent and w.received >= first and w.code < 400
        ]
    return late


async def test_leader_killed_mid_rollout_and_mid_upgrade_and_frozen(
    replicas: list[OperatorProcess], watch: Watch, audit_log: AuditLog
) -> None:
    group = Replicas(replicas)
    handovers: list[Handover] = []
    async with supervised(group):
        # Mid-rollout: the policy appears, then changes before each kill.
        await _set_policy(watch, "595.91.07", UPGRADE)
        for i in range(ROLLOUT_KILLS):

            async def change(i: int = i) -> None:
                if i:
                    enabled = i % 2 == 0
                    patch = {"spec": {"nodeStatusExporter": {"enabled": enabled}}}
                    await watch.client.patch(CLUSTER_POLICY, POLICY, patch)
                await asyncio.sleep(1.0)  # the leader is at it: kill it

            handover, _ = await _hand_over(watch, group, _kill_and_restart, change)
            handovers.append(handover)
        await _policy_ready(watch)
        await _rollout_done(watch, "595.91.07", 240)
        exporter = [
            name_of(d)
            for d in await watch.client.list_live(DAEMONSET, namespace=NAMESPACE)
            if name_of(d) == EXPORTER
        ]
        assert exporter == [EXPORTER], "the last change before the last kill was carried out"

        minor = 100
        version = f"595.{minor}.01"

        async def next_version() -> None:
            nonlocal minor, version
            minor += 1
            version = f"595.{minor}.01"
            await _set_policy(watch, version, UPGRADE)

        # Mid-upgrade: a node is in the walk whenever the leader dies. Three nodes' walk can
        # end while the killed replica comes back as a warm standby; a new version then
        # starts the next walk.
        async def in_walk() -> bool:
            if _in_progress(watch):
                return True
            if _upgraded(watch, version):
                await next_version()
            return False

        async def walking() -> None:
            await eventually(in_walk, "a node in the upgrade walk", 120)

        invariants = watch.invariants(1, 1, set())
        await _set_policy(watch, version, UPGRADE)
        for _ in range(UPGRADE_KILLS):
            handover, _ = await _hand_over(watch, group, _kill_and_restart, walking)
            handovers.append(handover)

        # Frozen, not dead: SIGSTOP until a standby holds the lease and acts, then SIGCONT.
        # It must find its lease gone and stop writing, not finish what it was doing.
        await next_version()

        def freeze(process: OperatorProcess) -> None:
            group.held.add(replicas.index(process))
            process.pause()

        paused, thawed = await _hand_over(watch, group, freeze, walking)
        await asyncio.sleep(2.0)  # the new leader acts meanwhile
        thawed.resume()
        await eventually(lambda: not thawed.alive(), "the thawed leader exits", 60)
        exit_code = thawed.popen.returncode if thawed.popen else None
        group.held.clear()

        await _rollout_done(watch, version, 300)
        await _policy_ready(watch)
        watch.drop(invariants)

    kills = [h.seconds for h in handovers]
    print(
        f"\ntakeover after kill -9 ({len(kills)}): min {min(kills):.2f}s, median "
        f"{statistics.median(kills):.2f}s, max {max(kills):.2f}s; after SIGSTOP "
        f"{paused.seconds:.2f}s (bound {TAKEOVER_BOUND:.1f}s: lease {LEASE_SECONDS:g}s + "
        f"renew period {RETRY_SECONDS:g}s +20% jitter); replicas restarted "
        f"{group.restarts} times besides the kills"
    )
    assert len(kills) == ROLLOUT_KILLS + UPGRADE_KILLS
    assert max([*kills, paused.seconds]) <= TAKEOVER_BOUND + SCHEDULING_SLACK, handovers
    assert exit_code == 1, "the thawed leader exits as one that lost its lease"
    assert "lost" in thawed.log_tail(20)
    late = _late_writes(audit_log, [*handovers, paused])
    assert late == [], "\n".join(late)
    assert not invariants.violations, invariants.violations[:5]
    assert invariants.cordons_seen == {name_of(n) for n in watch.gpu_nodes()}
