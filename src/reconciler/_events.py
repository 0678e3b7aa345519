"""Kubernetes Events: what `kubectl describe` shows a person.

Recording an event must never fail or slow a reconcile, so errors are logged and dropped.
Three rules keep a busy operator from writing thousands of Events, as client-go's event
correlator does, within a bounded memory:

* a repeat of the same event (object, type, reason, message) bumps the count of the first;
* similar events (same object, type and reason, other messages): once `max_similar`
  distinct messages came within `similar_window` seconds, every further new message goes to
  one event whose message is `(combined from similar events): <latest message>` and whose
  count is bumped, as `kubectl describe` users know from client-go (10 in 10 minutes there
  too). A repeat of one of the first messages still counts on its own event.
* a budget per object and reason: `spam_burst` writes (new events and count bumps alike),
  then one more every `spam_refill` seconds; the rest are dropped. client-go keeps such a
  budget per object (25, then one per 5 minutes); ours is per reason too, so a burst of one
  kind (a driver upgrade walking 1,000 nodes, each step reported on its policy) does not
  silence the others. Without it, that walk wrote an Event on its policy for every node
  step: in a 100-node walk, about 400 of the operator's 1,400 API writes.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler._client import Client
from reconciler._exceptions import NotFound, ReconcilerError
from reconciler._kinds import EVENT
from reconciler._objects import Object, metadata_of
from reconciler._transport import PatchType

log = logging.getLogger("reconciler.events")

NORMAL = "Normal"
WARNING = "Warning"

COMBINED_PREFIX = "(combined from similar events): "
MAX_SIMILAR = 10
"""Distinct messages of one (object, type, reason) before the next are combined."""
SIMILAR_WINDOW = 600.0
"""Seconds in which those count; a quiet reason starts again with events of its own."""

SPAM_BURST = 25
"""Event writes about one (object, reason) at once, as client-go's spam filter allows."""
SPAM_REFILL = 300.0
"""Seconds for each further write once those are spent."""

_COMBINED = "\x00combined"
"""The message part of the key of a combined event (no real message is equal to it)."""


class _Budget:
    """A token bucket: `tokens` left at `at` (seconds of the recorder's clock)."""

    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class _Similar:
    """The distinct messages seen of one (object, type, reason) in the current window."""

    __slots__ = ("messages", "since")

    def __init__(self, since: float) -> None:
        self.since = since
        self.messages: set[str] = set()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        client: Client,
        component: str,
        *,
        max_tracked: int = 4096,
        max_similar: int = MAX_SIMILAR,
        similar_window: float = SIMILAR_WINDOW,
        spam_burst: int = SPAM_BURST,
        spam_refill: float = SPAM_REFILL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self.component = component
        self.host = os.environ.get("NODE_NAME") or os.uname().nodename
        self._seen: OrderedDict[tuple[str, ...], tuple[str, str, int]] = OrderedDict()
        self._similar: OrderedDict[tuple[str, ...], _Similar] = OrderedDict()
        self._max_tracked = max_tracked
        self._max_similar = max_similar
        self._similar_window = similar_window
        self._budgets: OrderedDict[tuple[str, ...], _Budget] = OrderedDict()
        self._spam_burst = spam_burst
        self._spam_refill = spam_refill
        self._clock = clock
        self.dropped = 0
        """Events the budget dropped (for tests and debugging)."""

    def _spend(self, budget_key: tuple[str, ...]) -> bool:
        """Whether the (object, reason) has a write left; spends it."""
        now = self._clock()
        budget = self._budgets.get(budget_key)
        if budget is None:
            budget = self._budgets[budget_key] = _Budget(float(self._spam_burst), now)
        else:
            refilled = budget.tokens + (now - budget.at) / self._spam_refill
            budget.tokens = min(float(self._spam_burst), refilled)
            budget.at = now
        self._budgets.move_to_end(budget_key)
        while len(self._budgets) > self._max_tracked:
            self._budgets.popitem(last=False)
        if budget.tokens < 1:
            return False
        budget.tokens -= 1
        return True

    def _combine(self, similar_key: tuple[str, ...], message: str) -> bool:
        """Whether this event joins the combined one of its (object, type, reason)."""
        now = self._clock()
        similar = self._similar.get(similar_key)
        if similar is None or now - similar.since > self._similar_window:
            similar = _Similar(now)
        self._similar[similar_key] = similar
        self._similar.move_to_end(similar_key)
        while len(self._similar) > self._max_tracked:
            self._similar.popitem(last=False)
        if message in similar.messages:
            return False  # a repeat: its own event's count goes up
        if len(similar.messages) >= self._max_similar:
            return True
        similar.messages.add(message)
        return False

    async def event(self, obj: Object, type_: str, reason: str, message: str) -> None:
        """Record `reason`/`message` on `obj` (type `Normal` or `Warning`)."""
        m = metadata_of(obj)
        # Events of cluster-scoped objects live in "default", as kubectl expects.
        namespace = m.get("namespace") or "default"
        if not self._spend((str(m.get("uid") or ""), str(m.get("name")), reason)):
            self.dropped += 1
            log.debug("event %s on %s dropped (too many): %s", reason, m.get("name"), message)
            return
        similar_key = (str(m.get("uid") or ""), str(m.get("name")), type_, reason)
        key = (*similar_key, message)
        if self._combine(similar_key, message):
            key = (*similar_key, _COMBINED)
            message = COMBINED_PREFIX + message
        try:
            res = await self._client.resource(EVENT)
            seen = self._seen.get(key)
            if seen is not None:
                ev_namespace, ev_name, count = seen
                body: dict[str, Any] = {"count": count + 1, "lastTimestamp": _now()}
                if key[-1] == _COMBINED:
                    body["message"] = message  # the latest of the similar ones
                try:
                    await self._client.request(
                        "PATCH",
                        res.path(ev_namespace, ev_name),
                        body=body,
                        content_type=PatchType.MERGE,
                    )
                    self._remember(key, (ev_namespace, ev_name, count + 1))
                    return
                except NotFound:
                    pass  # expired (events live an hour): start a new one
            ev_name = f"{m.get('name')}.{time.time_ns():x}"
            now = _now()
            body = {
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
