"""The per-node upgrade summary written to `status.upgrade` of the policy that governs it.

Only this part is the upgrade's, and the pool hands it to whoever writes the rest of that
status (`_pool.StatusSink`: in the operator, the policy controller's status writer, so each
status has one writer); the other parts are never in the body, so neither overwrites the
other. It is written only once the status exists (its `state` is required by the schema).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from components.api import Condition, NodeUpgradeStatus, UpgradeStatus
from components.upgrade._limits import Counts
from components.upgrade._model import NodeView
from components.upgrade._times import format_time
from reconciler import Object, name_of

_EntryKey = tuple[str, str, str, float | None]


class Entries:
    """Each node's status entry, kept while what it shows is unchanged: the pool status is
    recomputed over every node, but a burst of events changes only a few entries."""

    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit
        self._entries: dict[_EntryKey, NodeUpgradeStatus] = {}

    def entry(self, name: str, state: str, message: str, since: float | None) -> NodeUpgradeStatus:
        key = (name, state, message, since)
        found = self._entries.get(key)
        if found is None:
            if len(self._entries) >= self._limit:
                self._entries.clear()
            found = self._entries[key] = NodeUpgradeStatus(
                name=name,
                state=state,
                message=message,
                since=format_time(since) if since is not None else None,
            )
        return found


def upgrade_status(
    nodes: Sequence[NodeView],
    counts: Counts,
    *,
    auto_upgrade: bool,
    waits: Mapping[str, str],
    entries: Entries | None = None,
    conditions: Sequence[Condition] = (),
) -> UpgradeStatus:
    entries = entries if entries is not None else Entries()
    listed = [
        entries.entry(n.name, n.state.value, (waits.get(n.name) or n.message)[:1024], n.since)
        for n in nodes
    ]
    return UpgradeStatus.build(
        listed, auto_upgrade=auto_upgrade, available=counts.available, conditions=conditions
    )


def status_body(policy: Object, status: UpgradeStatus) -> Object | None:
    """The server-side apply body for `status.upgrade`, or None when nothing would change
    (or the status does not exist yet)."""
    current: Any = policy.get("status")
    if not isinstance(current, dict) or not current.get("state"):
        return None
    wanted = status.to_dict(defaults=True)
    if current.get("upgrade") == wanted:
        return None
    return {
        "apiVersion": policy.get("apiVersion"),
        "kind": policy.get("kind"),
        "metadata": {"name": name_of(policy)},
        "status": {"upgrade": wanted},
    }


class Waits:
    """Why each node waits, as the node reconciles last said (status shows it instead of
    the node's message). A change asks for a status write through `on_change`."""

    def __init__(self) -> None:
        self.by_node: dict[str, str] = {}
        self.on_change: Callable[[], None] = lambda: None

    def set(self, name: str, message: str) -> None:
        if self.by_node.get(name, "") == message:
            return
        if message:
            self.by_node[name] = message
        else:
            self.by_node.pop(name, None)
        self.on_change()

    def forget(self, name: str) -> None:
        self.by_node.pop(name, None)
