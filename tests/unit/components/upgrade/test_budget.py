"""A failure budget that halts: more failing nodes than the budget and no node is admitted;
the status and the metric say so; within the budget again, the walk goes on."""

from __future__ import annotations

from dataclasses import replace

from components.api import UpgradeState
from components.upgrade import MESSAGE, NodeView, failing, halt

from .builders import node, policy

S = UpgradeState
WIDE = {"maxParallelUpgrades": 3, "maxUnavailable": "100%"}


def pool(*failed: str) -> list[NodeView]:
    nodes = [
        node(n, S.UPGRADE_FAILED, unschedulable=True, **{MESSAGE: f"{n} broke"}) for n in failed
    ]
    return [
        *nodes,
        node("ok", S.UPGRADE_DONE),
        *(node(f"w{i}", S.UPGRADE_REQUIRED) for i in range(3)),
    ]


def test_without_a_budget_nothing_halts() -> None:
    assert halt(pool("a", "b", "c"), policy(**WIDE)) is None


def test_more_failures_than_the_budget_halt_and_name_each_node_and_reason() -> None:
    stop = halt(pool("b", "a"), policy(**WIDE, failureBudget=1), "580.95.05")
    assert stop is not None
    assert stop.failing == (("a", "a broke"), ("b", "b broke"))
    message = stop.message()
    assert message.startswith("driver 580.95.05: 2 nodes failed")
    assert "a: a broke; b: b broke" in message


def test_failures_within_the_budget_do_not_halt() -> None:
    assert halt(pool("a"), policy(**WIDE, failureBudget=1)) is None
    assert halt(pool("a"), policy(**WIDE, failureBudget=0)) is not None


def test_a_percentage_is_of_the_pool_rounded_up() -> None:
    # 6 nodes, 20% -> 2 may fail.
    assert halt(pool("a", "b"), policy(**WIDE, failureBudget="20%")) is None
    assert halt(pool("a", "b", "c"), policy(**WIDE, failureBudget="20%")) is not None


def test_a_node_not_ready_after_its_driver_restart_counts_as_failing() -> None:
    sick = replace(node("v", S.VALIDATION_REQUIRED), ready=False)
    assert failing([sick, node("x", S.VALIDATION_REQUIRED)]) == [
        ("v", "NotReady after its driver restarted")
    ]
    # Not ready before the walk touched its driver: not the driver's failure.
    assert failing([replace(node("u", S.UPGRADE_REQUIRED), ready=False)]) == []


def test_the_validator_refuses_a_bad_budget_by_name() -> None:
    from components.offline import validate_text

    text = """
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  driver:
    upgradePolicy: {failureBudget: "two"}
"""
    paths = [p.path for _, p in validate_text(text, "cp.yaml").problems]
    assert paths == ["spec.driver.upgradePolicy.failureBudget"]
