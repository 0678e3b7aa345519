"""The pre-flight seam: which `upgrade-required` nodes admission must leave where they are.

A node is admitted only once the image its driver DaemonSet will make it pull (the driver
container's image of that DaemonSet's template, so the OS tag, the precompiled kernel or the
digest exactly as rendered) is known to exist (`components.preflight`). The pull secrets
asked with are the template's `imagePullSecrets`, the ones the kubelet will use. What is
found goes on the policy as the `PreflightFailed` condition and, when it changes, as an
Event on the policy naming the image and the nodes that need it. The condition is written
by whoever writes the rest of the policy's status (`ConditionSink`: in the operator, the
policy controller's status writer, so one writer owns the conditions list); run alone, the
upgrade controller applies it itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from components.api import UpgradeState, template_pod_spec
from components.preflight import (
    CONDITION,
    EVENT_REASON,
    PASSED_REASON,
    BasicAuth,
    Gate,
    ImageChecker,
    ImageRef,
    credentials_for,
    docker_config_auths,
    gate,
)
from components.upgrade._model import NodeView
from components.upgrade._names import NODE, POD
from components.upgrade._pods import is_driver_pod, pick_driver_pod
from components.upgrade._reader import POD_NODE_INDEX, ClusterReader, Pool, PoolKey
from components.upgrade._times import format_time
from reconciler import Object, labels_of, name_of, uid_of

log = logging.getLogger("components.upgrade")

DRIVER_CONTAINER = "nvidia-driver-ctr"
PREFLIGHT_FIELD_MANAGER = "gpu-operator-preflight"
S = UpgradeState

ConditionSink = Callable[[Object, Mapping[str, Any]], Awaitable[object]]
"""Writes one condition (type, status, reason, message) into a policy's conditions, keeping
its `lastTransitionTime` while its status is the same."""


def driver_image_of(ds: Object | None) -> tuple[str, tuple[str, ...]] | None:
    """The driver image a DaemonSet's pods pull, and the pull secrets they pull it with."""
    if ds is None:
        return None
    spec = template_pod_spec(ds)
    containers = spec.get("containers") or []
    chosen = next((c for c in containers if c.get("name") == DRIVER_CONTAINER), None)
    if chosen is None or not chosen.get("image"):
        return None
    secrets = tuple(str(s.get("name")) for s in spec.get("imagePullSecrets") or [] if s.get("name"))
    return str(chosen["image"]), secrets


PASSED_MESSAGE = "every driver image checked is in its registry"
_UNSAID: Any = object()


def _stored_condition(obj: Object) -> tuple[bool, str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == CONDITION:
            return c.get("status") == "True", str(c.get("reason")), str(c.get("message"))
    return None


class AdmissionPreflight:
    """Checks, for each pool, the images its waiting nodes need; says which wait."""

    def __init__(
        self,
        reader: ClusterReader,
        client: Any,
        recorder: Any,
        *,
        checker: ImageChecker | None = None,
        on_change: Callable[[], None] | None = None,
        clock: Callable[[], float] | None = None,
        condition_sink: ConditionSink | None = None,
    ) -> None:
        self.reader, self.client, self.recorder = reader, client, recorder
        self.condition_sink: ConditionSink = condition_sink or self._apply_condition
        self.checker = checker or ImageChecker(on_change=on_change)
        if on_change is not None:
            self.checker.on_change = on_change
        self._said: dict[PoolKey, tuple[bool, str, str] | None] = {}
        self._told: dict[PoolKey, tuple[object, ...]] = {}
        """Per pool, the findings (`Gate.key`) the last Event was about."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writing: set[PoolKey] = set()
        self._open = False
        """Whether the last round held a node (`begin` starts a round)."""
        self._clock = clock

    def begin(self) -> None:
        """A new admission round over every pool."""
        self._open = False

    def held(self, pool: Pool, views: Sequence[NodeView]) -> frozenset[str]:
        """The `upgrade-required` nodes admission must skip now (their image is missing,
        or not checked yet). Every node's image is checked, not only the waiting nodes':
        a new install, or a node that would pull again, hears of a missing image too."""
        mode = pool.policy.preflight.mode
        if mode == "Off":
            self._report(pool, Gate())  # a condition said before is cleared
            return frozenset()
        needs: dict[str, str] = {}
        secrets_of: dict[str, tuple[str, ...]] = {}
        images: dict[str, tuple[str, tuple[str, ...]] | None] = {}
        for view in views:
            if view.skip:
                continue
            ds = self._target_daemonset(view.name)
            if ds is None:
                continue
            uid = uid_of(ds) or name_of(ds)
            if uid not in images:
                images[uid] = driver_image_of(ds)
            found = images[uid]
            if found is not None:
                needs[view.name], secrets_of[found[0]] = found
        checks = {
            image: self.checker.lookup(
                image, self._credentials(secrets_of[image]), secrets=",".join(secrets_of[image])
            )
            for image in set(needs.values())
        }
        result = gate(needs, checks, mode)
        self._report(pool, result)
        waiting = {v.name for v in views if v.state is S.UPGRADE_REQUIRED}
        held = frozenset((result.blocked | result.pending) & waiting)
        self._open = self._open or bool(held)
        return held

    def requeue_after(self) -> float | None:
        """When a verdict that holds nodes or is reported (missing, unreachable) is due
        again; None while nothing is held or reported (an image pushed since is then
        noticed without waiting for a node event)."""
        if not self._open and not any(v is not None for v in self._said.values()):
            return None
        return self.checker.next_expiry()

    def _target_daemonset(self, node: str) -> Object | None:
        pods = [
            self.reader.views.pod(p)
            for p in self.reader.cache.list(POD, index=(POD_NODE_INDEX, node))
            if is_driver_pod(labels_of(p))
        ]
        driver = pick_driver_pod(pods)
        if driver is not None:
            ds = self.reader.owner_daemonset(driver)
            if ds is not None:
                return ds
        obj = self.reader.cache.get(NODE, node)
        return self.reader.targeting_daemonset(obj) if obj is not None else None

    def _credentials(self, names: tuple[str, ...]) -> Callable[[ImageRef], Any]:
        async def find(ref: ImageRef) -> BasicAuth | None:
            auths: list[Mapping[str, BasicAuth]] = []
            for name in names:
                path = f"/api/v1/namespaces/{self.reader.namespace}/secrets/{name}"
                try:
                    secret = await self.client.request("GET", path)
                except Exception as exc:  # a missing or forbidden secret: ask without it
                    log.debug("pre-flight: pull secret %s not read: %s", name, exc)
                    continue
                auths.append(docker_config_auths(secret.get("data") or {}))
            return credentials_for(ref, auths)

        return find

    def _report(self, pool: Pool, result: Gate) -> None:
        """Writes the condition when what is found changed, or when the stored one is not
        what was said (another writer of the status dropped it); an Event with each change
        to a finding."""
        said = result.condition()
        if said is None and result.pending:
            return  # nothing known yet: keep what was said
        stored = _stored_condition(pool.obj)
        wanted = said or (False, PASSED_REASON, PASSED_MESSAGE)
        if said is None and stored is None:
            return  # no image ever failed: no condition at all
        previous = self._said.get(pool.key, _UNSAID)
        key = result.key()
        if previous is _UNSAID and stored is not None and stored[:2] == wanted[:2]:
            # Said before a restart of ours: not the Event again (the condition only if the
            # nodes it names changed meanwhile).
            self._told[pool.key] = key
            if stored == wanted:
                self._said[pool.key] = said
                return
        if (stored == wanted and previous == said) or pool.key in self._writing:
            return
        self._said[pool.key] = said
        event = said is not None and self._told.get(pool.key) != key
        self._told[pool.key] = key
        self._writing.add(pool.key)
        task = asyncio.get_running_loop().create_task(self._write(pool, wanted, event=event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, pool: Pool, wanted: tuple[bool, str, str], *, event: bool) -> None:
        try:
            await self._write_condition(pool, wanted, event=event)
        finally:
            self._writing.discard(pool.key)

    async def _write_condition(
        self, pool: Pool, wanted: tuple[bool, str, str], *, event: bool
    ) -> None:
        status, reason, message = wanted
        obj = pool.obj
        if event:
            log.info("%s %s: pre-flight: %s", pool.kind, pool.name, message)
            try:
                await self.recorder.event(obj, "Warning", EVENT_REASON, message)
            except Exception as exc:  # an event must never take anything down
                log.debug("pre-flight event not written: %s", exc)
        condition = {
            "type": CONDITION,
            "status": "True" if status else "False",
            "reason": reason,
            "message": message[:32000],
        }
        try:
            await self.condition_sink(obj, condition)
        except Exception as exc:  # a status write must never take anything down
            log.warning("%s %s: pre-flight condition not written: %s", pool.kind, pool.name, exc)
            self._said.pop(pool.key, None)

    async def _apply_condition(self, obj: Object, condition: Mapping[str, Any]) -> None:
        """The upgrade controller run alone: a server-side apply of this one condition under
        its own field manager."""
        stored = next(
            (
                c
                for c in (obj.get("status") or {}).get("conditions") or []
                if c.get("type") == condition["type"]
            ),
            None,
        )
        kept = stored is not None and stored.get("status") == condition["status"]
        since = stored.get("lastTransitionTime") if kept and stored else None
        body = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": {"name": name_of(obj)},
            "status": {
                "conditions": [
                    {**condition, "lastTransitionTime": since or format_time(self._now())}
                ]
            },
        }
        await self.client.apply_status(body, field_manager=PREFLIGHT_FIELD_MANAGER)

    def _now(self) -> float:
        return self._clock() if self._clock else time.time()

    async def close(self) -> None:
        await self.checker.close()
