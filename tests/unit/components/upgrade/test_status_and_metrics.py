"""What the upgrade writes for people to read: `status.upgrade` and the metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from components.api import UpgradeState
from components.upgrade import (
    MESSAGE,
    counts,
    status_body,
    upgrade_metrics_for,
    upgrade_status,
)

from .builders import NOW, node, policy

S = UpgradeState


def _status() -> dict[str, object]:
    nodes = [
        node("a", S.UPGRADE_DONE),
        node("b", S.DRAIN_REQUIRED, since=NOW),
        node("c", S.UPGRADE_FAILED, since=NOW, **{MESSAGE: "drain timed out"}),
        node("d", S.UPGRADE_REQUIRED),
    ]
    p = policy(maxParallelUpgrades=3, maxUnavailable="100%")
    status = upgrade_status(nodes, counts(nodes, p), auto_upgrade=True, waits={"b": "evicting"})
    return status.to_dict(defaults=True)


def test_status_counts_and_lists_the_nodes_not_done_failed_first() -> None:
    s = _status()
    assert (s["managed"], s["done"], s["inProgress"], s["failed"], s["pending"]) == (4, 1, 2, 1, 1)
    assert s["available"] == 1
    names = [n["name"] for n in s["nodes"]]  # type: ignore[index, union-attr]
    assert names == ["c", "b", "d"]
    by_name = {n["name"]: n for n in s["nodes"]}  # type: ignore[index, union-attr]
    assert by_name["c"]["message"] == "drain timed out"
    assert by_name["b"]["message"] == "evicting"
    assert by_name["b"]["since"].endswith("Z")


def test_status_is_written_only_once_the_policy_has_one_and_only_when_it_changes() -> None:
    nodes = [node("a", S.UPGRADE_DONE)]
    status = upgrade_status(nodes, counts(nodes, policy()), auto_upgrade=True, waits={})
    cp = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"}}
    assert status_body(cp, status) is None  # no status.state yet: the schema requires it
    cp["status"] = {"state": "ready"}
    body = status_body(cp, status)
    assert body is not None and set(body["status"]) == {"upgrade"}
    cp["status"] = {"state": "ready", "upgrade": status.to_dict(defaults=True)}
    assert status_body(cp, status) is None


def test_metrics_share_one_set_of_gauges_per_registry() -> None:
    registry = CollectorRegistry()
    m = upgrade_metrics_for(registry)
    assert upgrade_metrics_for(registry) is m
    m.set(enabled=True, in_progress=2, done=5, failed=1, available=0, pending=3)
    values = {s.name: s.value for metric in registry.collect() for s in metric.samples}
    assert values["gpu_operator_nodes_upgrades_in_progress"] == 2
    assert values["gpu_operator_nodes_upgrades_done"] == 5
    assert values["gpu_operator_nodes_upgrades_failed"] == 1
    assert values["gpu_operator_nodes_upgrades_pending"] == 3
    assert values["gpu_operator_driver_auto_upgrade_enabled"] == 1
