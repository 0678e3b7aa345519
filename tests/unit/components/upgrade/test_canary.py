"""Canary first: the canaries are admitted before any other node, and the rest waits until
each canary has stayed upgraded, Ready and validated for the soak time."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.api import DriverUpgradePolicySpec, UpgradeState
from components.offline import validate_text
from components.upgrade import AgentVerdict, NodeView, admit, canary_gate

from .builders import NOW, node, policy

S = UpgradeState
WIDE = {"maxParallelUpgrades": 0, "maxUnavailable": "100%"}


def admitted(nodes: list[NodeView], p: DriverUpgradePolicySpec, now: float = NOW) -> list[str]:
    return admit(nodes, p, hold=canary_gate(nodes, p, now).hold)


def pending(*names: str, since: float = NOW - 5) -> list[NodeView]:
    return [node(n, S.UPGRADE_REQUIRED, since=since) for n in names]


def test_without_a_canary_section_admission_is_unchanged() -> None:
    nodes = pending("a", "b", "c")
    assert admitted(nodes, policy(**WIDE)) == ["a", "b", "c"]
    assert admitted(nodes, policy(**WIDE, canary={"soakSeconds": 60})) == ["a", "b", "c"]


def test_a_count_admits_the_first_nodes_by_name_alone() -> None:
    nodes = pending("d", "c", "b", "a")
    assert admitted(nodes, policy(**WIDE, canary={"nodes": 2})) == ["a", "b"]


def test_the_rest_waits_while_a_canary_walks_and_says_why() -> None:
    nodes = [node("a", S.VALIDATION_REQUIRED, since=NOW - 5), *pending("b", "c")]
    p = policy(**WIDE, canary={"nodes": 1, "soakSeconds": 60})
    gate = canary_gate(nodes, p, NOW)
    assert gate.hold == {"b", "c"}
    assert "a is validation-required" in gate.wait
    assert admitted(nodes, p) == []


def test_the_rest_starts_only_once_every_canary_has_soaked() -> None:
    p = policy(**WIDE, canary={"nodes": 2, "soakSeconds": 60})
    nodes = [
        node("a", S.UPGRADE_DONE, since=NOW - 100),
        node("b", S.UPGRADE_DONE, since=NOW - 30),
        *pending("c", "d", since=NOW - 200),
    ]
    gate = canary_gate(nodes, p, NOW)
    assert admitted(nodes, p) == []
    assert "b soaking (30s left)" in gate.wait
    assert gate.requeue_after is not None and gate.requeue_after <= 30
    assert admitted(nodes, p, now=NOW + 31) == ["c", "d"]


@pytest.mark.parametrize(
    "sick",
    [
        {"ready": False},
        {"validated": AgentVerdict(status="False", reason="Failed", since=NOW - 500)},
        {"state": S.UPGRADE_FAILED},
    ],
    ids=["not-ready", "not-validated", "failed"],
)
def test_a_canary_that_is_not_healthy_holds_the_rest_back_for_good(sick: dict[str, object]) -> None:
    p = policy(**WIDE, canary={"nodes": 1, "soakSeconds": 60})
    canary = replace(node("a", S.UPGRADE_DONE, since=NOW - 500), **sick)  # type: ignore[arg-type]
    nodes = [canary, *pending("b", since=NOW - 400)]
    assert admitted(nodes, p, now=NOW + 10_000) == []


def test_the_soak_restarts_when_the_canary_turns_ready_or_validated_again() -> None:
    p = policy(**WIDE, canary={"nodes": 1, "soakSeconds": 60})
    canary = replace(
        node("a", S.UPGRADE_DONE, since=NOW - 500),
        ready_since=NOW - 10,
        validated=AgentVerdict(status="True", since=NOW - 400),
    )
    nodes = [canary, *pending("b", since=NOW - 400)]
    assert admitted(nodes, p) == []
    assert admitted(nodes, p, now=NOW + 51) == ["b"]


def test_a_canary_not_yet_seen_to_need_the_change_soaks_from_when_the_rest_did() -> None:
    """The canary's own detection may lag the others' by a moment: it upgraded long ago, so
    without this the others would pass it before it turns upgrade-required itself."""
    p = policy(**WIDE, canary={"nodes": 1, "soakSeconds": 60})
    nodes = [node("a", S.UPGRADE_DONE, since=NOW - 10_000), *pending("b", since=NOW - 1)]
    assert admitted(nodes, p) == []
    assert admitted(nodes, p, now=NOW + 60) == ["b"]


def test_a_selector_picks_the_canaries_by_label() -> None:
    p = policy(**WIDE, canary={"selector": "pool=canary", "soakSeconds": 0})
    nodes = pending("a", "b", "c")
    nodes[2] = replace(nodes[2], labels={"pool": "canary"})
    assert admitted(nodes, p) == ["c"]


def test_a_node_labelled_to_skip_upgrades_is_never_a_canary() -> None:
    nodes = pending("a", "b", "c")
    nodes[0] = replace(nodes[0], skip=True, labels={"pool": "canary"})
    nodes[1] = replace(nodes[1], labels={"pool": "canary"})
    by_count = policy(**WIDE, canary={"nodes": 1})
    by_label = policy(**WIDE, canary={"selector": "pool=canary"})
    assert admitted(nodes, by_count) == ["b"]
    assert admitted(nodes, by_label) == ["b"]


@pytest.mark.parametrize(
    ("selector", "said"), [("pool in (a", "is invalid"), ("pool=nowhere", "matches no node")]
)
def test_a_selector_that_picks_nothing_holds_every_node(selector: str, said: str) -> None:
    p = policy(**WIDE, canary={"selector": selector})
    nodes = pending("a", "b")
    gate = canary_gate(nodes, p, NOW)
    assert gate.hold == {"a", "b"} and said in gate.wait
    assert admitted(nodes, p) == []


def test_limits_still_hold_among_the_canaries() -> None:
    p = policy(maxParallelUpgrades=1, maxUnavailable="100%", canary={"nodes": 3})
    assert admitted(pending("a", "b", "c", "d"), p) == ["a"]


def test_validate_refuses_bad_canary_values_by_name() -> None:
    text = """
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  driver:
    upgradePolicy:
      canary: {nodes: 2, selector: "pool=canary", soakSeconds: -1}
"""
    problems = {p.path: p.message for _, p in validate_text(text, "cp.yaml").problems}
    assert "spec.driver.upgradePolicy.canary.soakSeconds" in problems
    assert "one way" in problems["spec.driver.upgradePolicy.canary.selector"]
