"""Writing a policy's status (ClusterPolicy, NVIDIADriver): only when it changed, with an
Event when its readiness changes, and changes of progress alone paced.

"Changed" is judged against the status as we last left it (`reconciler.WrittenCopies`):
our own status writes trigger no reconcile, so a write skipped against a cache that has not
seen our previous one would leave that one on the server for good.

One writer per kind writes every part of its objects' status: the driver upgrade hands
its `status.upgrade` to the writer of the policy that governs the pool (`write_part`,
wired in `_operator`), so each status has one writer, one field manager and one account of
what was last written. Pre-flight's `PreflightFailed` condition comes the same way
(`write_condition`): the writer holds it and lays it over every status it writes, so a
write of the policy's own conditions never drops it, and the two never race.

A policy's turn to `ready` waits until what it reports then is final (`ReadyHold`).
A DaemonSet that finishes rolling out reconciles its policy at once: at 100 nodes the
paced turn left `ready` 0.2-4.7 s behind the rollout, and `kubectl wait` with it. But the
driver upgrade keeps its own account of the same rollout (each node's upgrade-state label,
the policy's `status.upgrade` counts), and that may still be on its way at that moment. A
`ready` written before it is a `ready` followed by more writes: a user who waits for
`ready` and then reads the policy sees it change under them. So the first `ready` waits
while anything else that reports into the policy has work under way, rechecked every
`RECHECK_SECONDS` without a reconcile, for at most `HOLD_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from components.api import (
    ClusterPolicyStatus,
    ConditionType,
    GPUClusterStatus,
    NVIDIADriverStatus,
)
from components.controllers._apply import Change
from components.controllers._status import Findings
from components.metrics import OperatorMetrics, ReconciliationStatus
from reconciler import (
    GVK,
    NORMAL,
    WARNING,
    Client,
    EventRecorder,
    Object,
    Result,
    WrittenCopies,
    name_of,
    revision_of,
)

OWNED_STATUS_KEYS = (
    "state",
    "namespace",
    "observedGeneration",
    "conditions",
    "components",
    "nodeAgent",
    "remediation",
)
"""The status fields a policy's own writer compares and writes; `upgrade` is the upgrade
controller's part (`write_part`)."""


def owned(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: raw[k] for k in OWNED_STATUS_KEYS if raw and k in raw}


def milestones(raw: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """What of a stored status a watcher acts on: the state, the generation it speaks of,
    each condition's type, status and reason, each operand's state. Counts, messages and the
    nodes named as not ready are progress: they change on every pod of a rollout."""
    raw = raw or {}
    return (
        raw.get("state"),
        raw.get("namespace"),
        raw.get("observedGeneration"),
        sorted(
            (str(c.get("type")), str(c.get("status")), str(c.get("reason")))
            for c in raw.get("conditions") or ()
        ),
        [(c.get("name"), c.get("state")) for c in raw.get("components") or ()],
        "nodeAgent" in raw,
        [(e.get("node"), e.get("step")) for e in raw.get("remediation") or ()],
    )


def merge_conditions(
    conditions: Sequence[Mapping[str, Any]],
    laid: Sequence[Mapping[str, Any]],
    *,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """`conditions` with each of `laid` in place of the one of its type (or added):
    its `lastTransitionTime` is the stored one's while the status is the same, else its own,
    else `now`."""
    out = [dict(c) for c in conditions]
    for cond in laid:
        old = next((c for c in out if c.get("type") == cond.get("type")), None)
        new = {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        if old is not None and old.get("status") == new.get("status"):
            new["lastTransitionTime"] = old.get("lastTransitionTime") or now
        else:
            new["lastTransitionTime"] = cond.get("lastTransitionTime") or now
        if old is None:
            out.append(new)
        else:
            out[out.index(old)] = new
    return out


def status_patch(
    previous: Mapping[str, Any] | None,
    status: ClusterPolicyStatus | NVIDIADriverStatus | GPUClusterStatus,
    *,
    held: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any] | None:
    """The merge patch body that writes `status` with the `held` conditions laid over its
    own (another part's, as `merge_conditions` does), or None when the stored one equals it."""
    new = owned(status.to_dict(defaults=True))
    if held:
        new["conditions"] = merge_conditions(new.get("conditions") or [], held)
    old = owned(previous)
    if new == old:
        return None
    # A part that is gone (the node agent switched off) is removed, not left as it was.
    return {"status": {**{k: None for k in old if k not in new}, **new}}


class StatusWriter:
    """One kind's status writes. `report_ready_changes`: an Event also when the Ready
    condition's reason or message changes with the state unchanged (the ClusterPolicy's
    names the operands not ready); otherwise only a change of state makes one."""

    def __init__(
        self,
        client: Client,
        recorder: EventRecorder,
        gvk: GVK,
        *,
        report_ready_changes: bool,
    ) -> None:
        self.client = client
        self.recorder = recorder
        self.gvk = gvk
        self.report_ready_changes = report_ready_changes
        self._written: dict[str, float] = {}
        """Per object, when its status was last written (monotonic)."""
        self._returned = WrittenCopies()
        self._held: dict[str, dict[str, dict[str, Any]]] = {}
        """Per object, the conditions another part of the operator hands us, by type, as
        last written (`write_condition`)."""
        self._locks: dict[str, asyncio.Lock] = {}

    def latest(self, obj: Object) -> Object:
        """`obj` (the cache's copy), or the object our last status write returned if the
        cache has not seen that version yet."""
        latest = self._returned.latest(name_of(obj), obj, revision_of(obj))
        return obj if latest is None else latest

    async def write_part(self, name: str, part: Mapping[str, Any]) -> None:
        """Writes the top-level `part` of one object's status as given (the driver
        upgrade's `status.upgrade`, which it builds and paces itself)."""
        returned = await self.client.patch(
            self.gvk, name, {"status": dict(part)}, subresource="status"
        )
        self._returned.remember(name, returned)

    async def write_condition(self, obj: Object, condition: Mapping[str, Any]) -> None:
        """Writes one condition that another part of the operator decides (pre-flight's
        `PreflightFailed`: type, status, reason, message) into the object's conditions, from
        our own latest copy; held from here on, so every later `write` keeps it.
        `lastTransitionTime` moves only when its status changes."""
        name = name_of(obj)
        async with self._lock(name):
            latest = self.latest(obj)
            conditions = (latest.get("status") or {}).get("conditions") or []
            merged = merge_conditions(conditions, [condition], now=_now())
            written = next(c for c in merged if c.get("type") == condition.get("type"))
            self._held.setdefault(name, {})[str(condition.get("type"))] = written
            if merged == conditions:
                return
            patch = {"status": {"conditions": merged}}
            returned = await self.client.patch(self.gvk, name, patch, subresource="status")
            self._returned.remember(name, returned)

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    async def write(
        self,
        obj: Object,
        status: ClusterPolicyStatus | NVIDIADriverStatus | GPUClusterStatus,
        *,
        progress_every: float = 0.0,
    ) -> float | None:
        """Writes `status` when it differs from the stored one. A change of progress alone
        (`milestones` unchanged) less than `progress_every` seconds after the last write
        waits: the seconds until it may go, else None."""
        async with self._lock(name_of(obj)):
            return await self._write(obj, status, progress_every)

    async def _write(
        self,
        obj: Object,
        status: ClusterPolicyStatus | NVIDIADriverStatus | GPUClusterStatus,
        progress_every: float,
    ) -> float | None:
        obj = self.latest(obj)
        previous = obj.get("status") or {}
        held = self._held.get(name_of(obj), {})
        patch = status_patch(previous, status, held=list(held.values()))
        if patch is None:
            return None
        name = name_of(obj)
        stored = {k: v for k, v in patch["status"].items() if v is not None}
        if progress_every and milestones(previous) == milestones(stored):
            last = self._written.get(name)
            wait = last + progress_every - time.monotonic() if last is not None else 0.0
            if wait > 0:
                return wait
        returned = await self.client.patch(self.gvk, name, patch, subresource="status")
        self._written[name] = time.monotonic()
        self._returned.remember(name, returned)
        ready = status.condition(ConditionType.READY)
        if ready is None or not self._readiness_changed(previous, status.state, ready):
            return None
        kind = NORMAL if status.state == "ready" else WARNING
        await self.recorder.event(obj, kind, ready.reason, ready.message)
        return None

    def _readiness_changed(self, previous: Mapping[str, Any], state: str, ready: Any) -> bool:
        if previous.get("state") != state:
            return True
        return self.report_ready_changes and not _same_ready(previous, ready)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _same_ready(previous: Mapping[str, Any], ready: Any) -> bool:
    for cond in previous.get("conditions") or ():
        if cond.get("type") == ConditionType.READY:
            return bool(
                cond.get("status") == ready.status
                and cond.get("reason") == ready.reason
                and cond.get("message") == ready.message
            )
    return False


RECHECK_SECONDS = 0.1
"""How often a held `ready` asks again (a few integer reads)."""
HOLD_SECONDS = 10.0
"""The longest a `ready` waits: past it, it is written anyway (work that never settles, a
node whose reconcile keeps failing, must not keep the policy from saying what it is)."""


class ReadyHold:
    def __init__(
        self,
        settling: Callable[[], bool] | None,
        poke: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`settling`: whether other work that reports into the policy is under way (None:
        nothing to wait for). `poke`: reconcile the policy again now, once it is not."""
        self.settling = settling
        self.poke = poke
        self.clock = clock
        self._since: float | None = None
        self._armed = False

    def holds(self, *, was_ready: bool, is_ready: bool) -> bool:
        """Whether a status that turns the policy `ready` must wait (a poke comes when it
        may go). Only the turn waits: a policy already ready writes its changes at once."""
        if self.settling is None or was_ready or not is_ready:
            self._since = None
            return False
        now = self.clock()
        if self._since is None:
            self._since = now
        if now - self._since >= HOLD_SECONDS or not self.settling():
            self._since = None
            return False
        self._arm()
        return True

    def seconds_left(self) -> float:
        """Until a held `ready` is written anyway (the reconcile's own requeue, should the
        recheck's poke never come)."""
        since = self._since
        return HOLD_SECONDS if since is None else max(0.0, since + HOLD_SECONDS - self.clock())

    def _arm(self) -> None:
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_later(RECHECK_SECONDS, self._check)

    def _check(self) -> None:
        since = self._since
        if (
            since is not None
            and self.settling is not None
            and self.settling()
            and self.clock() - since < HOLD_SECONDS
        ):
            asyncio.get_running_loop().call_later(RECHECK_SECONDS, self._check)
            return
        self._armed = False
        self.poke()


READY = "ready"
_REASONS = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}


class StackReport:
    """One stack controller's metrics and Events; `log` takes each change at debug, as
    "`kind` name: change"."""

    def __init__(
        self, metrics: OperatorMetrics, recorder: EventRecorder, log: logging.Logger, kind: str
    ) -> None:
        self.metrics = metrics
        self.recorder = recorder
        self.log = log
        self.kind = kind

    async def counted(self, reconcile: Awaitable[Result | None]) -> Result | None:
        """`reconcile` awaited, counted, and an error it raises counted and the status
        metric set to it."""
        self.metrics.reconciliation_total.inc()
        try:
            return await reconcile
        except Exception:
            self.metrics.reconciliation_failed_total.inc()
            self.metrics.set_status(ReconciliationStatus.ERROR)
            raise

    async def changes(self, obj: Object, changes: Sequence[Change]) -> None:
        """One Event per operand and kind of change, naming its objects: a fresh policy
        creates 37 objects, which as 37 Events would spend the object's Event budget
        (`reconciler.EventRecorder`) before its DaemonSets' turn."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for change in changes:
            self.log.debug("%s %s: %s", self.kind, name_of(obj), change)
            grouped.setdefault((change.component, change.verb), []).append(change.what)
        for (component, verb), objects in grouped.items():
            message = f"{verb} {', '.join(objects)} ({component})"
            await self.recorder.event(obj, NORMAL, _REASONS[verb], message)

    def reconciled(self, findings: Findings, state: str) -> None:
        """The metrics of a reconcile that wrote its status in `state`."""
        m = self.metrics
        m.gpu_nodes_total.set(findings.gpu_nodes)
        m.reconciliation_has_nfd_labels.set(1 if findings.has_nfd_labels else 0)
        if state == READY:
            m.set_status(ReconciliationStatus.READY)
            m.reconciliation_last_success_ts_seconds.set(time.time())
        else:
            m.set_status(ReconciliationStatus.NOT_READY)
            m.reconciliation_failed_total.inc()
