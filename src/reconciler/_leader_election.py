"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

Only the leader runs controllers; standbys keep warm caches and take over when the
leader's lease runs out. Expiry is judged by *our* clock from when we last saw the lease
change, never by comparing its renewTime with our clock, so skew between machines does not
matter. A leader that cannot renew within `renew_deadline` stops leading before its lease
(`lease_duration`) can expire, so two leaders never act at once.

A leader whose process was paused (SIGSTOP, a frozen VM, a long GC) wakes up believing it
still leads until its renew loop runs again; its workers may run first. `may_write()` is
the check for them: true only while the last successful renewal, counted from when it was
sent, is younger than `renew_deadline`, by the monotonic clock, which keeps counting while
the process is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler._exceptions import AlreadyExists, Conflict, NotFound, ReconcilerError
from reconciler._metrics import Metrics
from reconciler._objects import Object
from reconciler._transport import Transport

log = logging.getLogger("reconciler.leaderelection")


def _default_identity() -> str:
    return f"{os.uname().nodename}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    name: str
    namespace: str
    identity: str = field(default_factory=_default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, transport: Transport, config: LeaderElectionConfig, metrics: Metrics | None = None
    ) -> None:
        self._transport = transport
        self.config = config
        self._path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        )
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._observed_rv = ""
        self._renewed_at: float | None = None
        self.is_leader = False
        self._gauge = (
            metrics.leader_election_master_status.labels(name=config.name) if metrics else None
        )
        if self._gauge is not None:
            self._gauge.set(0)

    def may_write(self) -> bool:
        """Whether a write may go out now: we lead and our lease cannot have expired for
        the others (see the module's docstring)."""
        return (
            self.is_leader
            and self._renewed_at is not None
            and time.monotonic() - self._renewed_at < self.config.renew_deadline
        )

    async def acquire(self) -> None:
        """Return once we hold the lease; try every retry_period (jittered) until then,
        and once more the moment the holder's lease, as we observed it, runs out."""
        log.debug("lease %s: trying to acquire as %s", self._path, self.config.identity)
        while True:
            began = time.monotonic()
            if await self._try(began):
                self._renewed_at = began
                self._set_leader(True)
                log.info("lease %s/%s acquired by %s", self.config.namespace, self.config.name,
                         self.config.identity)  # fmt: skip
                return
            wait = self.config.retry_period * (1.0 + 0.2 * random.random())
            expires_in = self._expires_at - time.monotonic()
            if 0 < expires_in < wait:
                wait = expires_in + 0.01  # just past it: our clock says it has run out
            await asyncio.sleep(wait)

    async def hold(self) -> None:
        """Renew every retry_period; return, no longer leader, once renewing has failed
        for `renew_deadline`."""
        cfg = self.config
        while True:
            await asyncio.sleep(cfg.retry_period)
            last_renew = self._renewed_at if self._renewed_at is not None else 0.0
            began = time.monotonic()
            left = last_renew + cfg.renew_deadline - began
            renewed = False
            if left > 0:
                try:
                    async with asyncio.timeout(left):
                        renewed = await self._try(began)
                except TimeoutError:
                    renewed = False
            if renewed:
                # Counted from when the renewal was sent: the others may have seen it then.
                self._renewed_at = began
            elif time.monotonic() - last_renew >= cfg.renew_deadline:
                self._set_leader(False)
                log.info("lease %s/%s lost by %s", cfg.namespace, cfg.name, cfg.identity)
                return

    async def release(self) -> None:
        """Give the lease up now so a standby need not wait for it to expire."""
        if not self.is_leader:
            return
        self._set_leader(False)
        try:
            lease = await self._transport.request("GET", self._path, request_timeout=5.0)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.config.identity:
                return
            now = _micro_time()
            lease["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            await self._transport.request("PUT", self._path, body=lease, request_timeout=5.0)
            log.info("lease %s/%s released by %s", self.config.namespace, self.config.name,
                     self.config.identity)  # fmt: skip
        except (ReconcilerError, TimeoutError) as exc:
            log.warning("could not release lease %s: %s", self._path, exc)

    async def _try(self, now: float) -> bool:
        """One attempt to acquire or renew; False if someone else validly holds it."""
        cfg = self.config
        stamp = _micro_time()
        duration = max(1, round(cfg.lease_duration))
        try:
            try:
                lease = await self._transport.request("GET", self._path)
            except NotFound:
                body: Object = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                    "spec": {
                        "holderIdentity": cfg.identity,
                        "leaseDurationSeconds": duration,
                        "acquireTime": stamp,
                        "renewTime": stamp,
                        "leaseTransitions": 0,
                    },
                }
                created = await self._transport.request(
                    "POST", self._path.rsplit("/", 1)[0], body=body
                )
                self._observe(created, now)
                return True
            spec = lease.get("spec") or {}
            self._observe(lease, now)
            holder = spec.get("holderIdentity") or ""
            held_for = float(spec.get("leaseDurationSeconds") or 0)
            if holder and holder != cfg.identity and now < self._observed_at + held_for:
                return False
            transitions = int(spec.get("leaseTransitions") or 0)
            lease["spec"] = {
                **spec,
                "holderIdentity": cfg.identity,
                "leaseDurationSeconds": duration,
                "renewTime": stamp,
                "acquireTime": spec.get("acquireTime") if holder == cfg.identity else stamp,
                "leaseTransitions": transitions if holder == cfg.identity else transitions + 1,
            }
            updated = await self._transport.request("PUT", self._path, body=lease)
            self._observe(updated, now)
            return True
        except (Conflict, AlreadyExists):
            return False  # someone else wrote first; look again next time
        except ReconcilerError as exc:
            log.debug("lease %s: attempt failed: %s", self._path, exc)
            return False

    @property
    def _expires_at(self) -> float:
        """When the lease we last observed runs out by our clock (0 if none was seen)."""
        if self._observed_record is None:
            return 0.0
        return self._observed_at + float(self._observed_record[1] or 0)

    def _observe(self, lease: Object, now: float) -> None:
        spec = lease.get("spec") or {}
        record = (
            spec.get("holderIdentity"),
            spec.get("leaseDurationSeconds"),
            spec.get("renewTime"),
            spec.get("leaseTransitions"),
        )
        if record != self._observed_record:
            self._observed_record = record
            self._observed_at = now

    def _set_leader(self, value: bool) -> None:
        self.is_leader = value
        if self._gauge is not None:
            self._gauge.set(1 if value else 0)
