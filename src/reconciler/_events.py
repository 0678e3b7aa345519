"""Kubernetes Events: what `kubectl describe` shows a person.

Recording an event must never fail or slow a reconcile, so errors are logged and dropped.
Repeats of the same event on the same object bump a count on the first one instead of
creating thousands of objects (the reason client-go aggregates), within a bounded memory.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from reconciler._client import Client
from reconciler._exceptions import NotFound, ReconcilerError
from reconciler._kinds import EVENT
from reconciler._objects import Object, meta
from reconciler._transport import MERGE_PATCH

log = logging.getLogger("reconciler.events")

NORMAL = "Normal"
WARNING = "Warning"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, client: Client, component: str, *, max_tracked: int = 4096) -> None:
        self._client = client
        self.component = component
        self.host = os.environ.get("NODE_NAME") or os.uname().nodename
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self._max_tracked = max_tracked

    async def event(self, obj: Object, type_: str, reason: str, message: str) -> None:
        """Record `reason`/`message` on `obj` (type `Normal` or `Warning`)."""
        m = meta(obj)
        # Events of cluster-scoped objects live in "default", as kubectl expects.
        namespace = m.get("namespace") or "default"
        key = (str(m.get("uid") or ""), str(m.get("name")), type_, reason, message)
        try:
            res = await self._client.resource(EVENT)
            seen = self._seen.get(key)
            if seen is not None:
                ev_namespace, ev_name, count = seen
                try:
                    await self._client.request(
                        "PATCH",
                        res.path(ev_namespace, ev_name),
                        body={"count": count + 1, "lastTimestamp": _now()},
                        content_type=MERGE_PATCH,
                    )
                    self._remember(key, (ev_namespace, ev_name, count + 1))
                    return
                except NotFound:
                    pass  # expired (events live an hour): start a new one
            ev_name = f"{m.get('name')}.{time.time_ns():x}"
            now = _now()
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": ev_name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": obj.get("apiVersion"),
                    "kind": obj.get("kind"),
                    "name": m.get("name"),
                    "namespace": m.get("namespace") or "",
                    "uid": m.get("uid"),
                    "resourceVersion": m.get("resourceVersion"),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "source": {"component": self.component, "host": self.host},
                "reportingComponent": self.component,
                "reportingInstance": self.host,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            await self._client.request("POST", res.path(namespace), body=body)
            log.debug("event %s %s on %s: %s", type_, reason, m.get("name"), message)
            self._remember(key, (namespace, ev_name, 1))
        except ReconcilerError as exc:
            log.warning("could not record event %s on %s: %s", reason, m.get("name"), exc)

    def _remember(self, key: tuple[str, ...], value: tuple[str, str, int]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > self._max_tracked:
            self._seen.popitem(last=False)
