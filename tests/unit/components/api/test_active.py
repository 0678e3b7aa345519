"""The oldest ClusterPolicy (not being deleted) is the active one."""

from __future__ import annotations

import pytest

from components.api import active_cluster_policy

pytestmark = pytest.mark.unit


def policy(name: str, created: str, deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta}


def test_oldest_then_name() -> None:
    a = policy("b", "2026-01-01T00:00:00Z")
    b = policy("a", "2026-01-01T00:00:00Z")
    c = policy("c", "2025-01-01T00:00:00Z", deleting=True)
    assert active_cluster_policy([a, b, c]) is b
    assert active_cluster_policy([]) is None
