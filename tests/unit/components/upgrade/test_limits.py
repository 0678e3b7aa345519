"""The limits: in progress, unavailable, and which nodes may start now.

The properties are checked over random pools: whatever the nodes' states, cordons and
readiness, admitting never takes in-progress above maxParallelUpgrades nor unavailable
above maxUnavailable (unless they already were above before, through no step of ours),
and it never stalls while a start is allowed.
"""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from components.api import UpgradeState
from components.upgrade import IN_PROGRESS, NodeView, admit, counts, max_unavailable

from .builders import node, policy

S = UpgradeState
ALL_STATES = list(S)


def test_in_progress_is_the_reference_formula() -> None:
    nodes = [
        node("a", S.UNKNOWN),
        node("b", S.UPGRADE_DONE),
        node("c", S.UPGRADE_REQUIRED),
        node("d", S.DRAIN_REQUIRED),
        node("e", S.UPGRADE_FAILED),
        node("f", S.CORDON_REQUIRED),
    ]
    c = counts(nodes, policy(maxParallelUpgrades=5, maxUnavailable="100%"))
    assert (c.managed, c.pending, c.in_progress, c.done, c.failed) == (6, 1, 3, 1, 1)
    assert c.unavailable == 1  # cordon-required counts as about to be unavailable


def test_max_unavailable_percent_rounds_up_over_managed_nodes() -> None:
    assert max_unavailable(policy(maxUnavailable="25%"), 10) == 3
    assert max_unavailable(policy(maxUnavailable="25%"), 1) == 1
    assert max_unavailable(policy(maxUnavailable="0%"), 10) == 0
    assert max_unavailable(policy(maxUnavailable=2), 10) == 2


def test_admits_up_to_max_parallel_in_name_order() -> None:
    nodes = [node(n, S.UPGRADE_REQUIRED) for n in "dcba"]
    assert admit(nodes, policy(maxParallelUpgrades=2, maxUnavailable="100%")) == ["a", "b"]


def test_zero_means_unlimited_parallel_but_max_unavailable_still_holds() -> None:
    nodes = [node(str(i), S.UPGRADE_REQUIRED) for i in range(10)]
    assert len(admit(nodes, policy(maxParallelUpgrades=0, maxUnavailable=3))) == 3
    assert len(admit(nodes, policy(maxParallelUpgrades=0, maxUnavailable="100%"))) == 10


def test_failed_nodes_keep_their_slot() -> None:
    nodes = [node("a", S.UPGRADE_FAILED, unschedulable=True), node("b", S.UPGRADE_REQUIRED)]
    assert admit(nodes, policy(maxParallelUpgrades=1, maxUnavailable="100%")) == []


def test_skip_label_keeps_a_node_waiting() -> None:
    nodes = [node("a", S.UPGRADE_REQUIRED, skip=True), node("b", S.UPGRADE_REQUIRED)]
    assert admit(nodes, policy(maxParallelUpgrades=5, maxUnavailable="100%")) == ["b"]


def test_cordoned_or_not_ready_nodes_count_as_unavailable() -> None:
    nodes = [
        node("x", S.UPGRADE_DONE, unschedulable=True),
        node("y", S.UPGRADE_DONE, ready=False),
        node("a", S.UPGRADE_REQUIRED),
        node("b", S.UPGRADE_REQUIRED),
    ]
    # 4 managed, maxUnavailable 75% -> 3; two already unavailable -> one may start.
    assert admit(nodes, policy(maxParallelUpgrades=0, maxUnavailable="75%")) == ["a"]
    assert counts(nodes, policy(maxParallelUpgrades=0, maxUnavailable="75%")).available == 1


def test_an_already_cordoned_node_may_start_without_unavailability_budget() -> None:
    nodes = [
        node("a", S.UPGRADE_REQUIRED),
        node("z", S.UPGRADE_REQUIRED, unschedulable=True),
        node("w", S.UPGRADE_DONE, unschedulable=True),
    ]
    # budget: 1 - 2 unavailable < 0, yet the cordoned node costs nothing; the slot limit holds.
    assert admit(nodes, policy(maxParallelUpgrades=1, maxUnavailable=1)) == ["z"]
    assert admit(nodes, policy(maxParallelUpgrades=2, maxUnavailable=1)) == ["z"]


# -- properties over random pools ----------------------------------------------------------


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[NodeView], int, int | str]:
    size = draw(st.integers(min_value=0, max_value=30))
    nodes = [
        node(
            f"n{i:02d}",
            draw(st.sampled_from(ALL_STATES)),
            unschedulable=draw(st.sampled_from([False, False, True])),
            ready=draw(st.sampled_from([True, True, True, False])),
            skip=draw(st.sampled_from([False, False, False, True])),
        )
        for i in range(size)
    ]
    parallel = draw(st.integers(min_value=0, max_value=6))
    unavailable: int | str = draw(
        st.integers(min_value=0, max_value=8)
        | st.integers(min_value=0, max_value=100).map(lambda p: f"{p}%")
    )
    return nodes, parallel, unavailable


def _unavailable(nodes: list[NodeView]) -> int:
    return sum(1 for n in nodes if n.unavailable or n.state is S.CORDON_REQUIRED)


def _in_progress(nodes: list[NodeView]) -> int:
    return sum(1 for n in nodes if n.state in IN_PROGRESS)


def _after(nodes: list[NodeView], chosen: list[str]) -> list[NodeView]:
    names = set(chosen)
    return [replace(n, state=S.CORDON_REQUIRED) if n.name in names else n for n in nodes]


@settings(max_examples=400, deadline=None)
@given(pools())
def test_admission_never_breaks_a_limit(pool: tuple[list[NodeView], int, int | str]) -> None:
    nodes, parallel, unavailable = pool
    p = policy(maxParallelUpgrades=parallel, maxUnavailable=unavailable)
    chosen = admit(nodes, p)
    after = _after(nodes, chosen)
    cap = max_unavailable(p, len(nodes))

    by_name = {n.name: n for n in nodes}
    assert len(set(chosen)) == len(chosen)
    for name in chosen:
        assert by_name[name].state is S.UPGRADE_REQUIRED and not by_name[name].skip
    if parallel:
        assert _in_progress(after) <= max(_in_progress(nodes), parallel)
        if chosen:
            assert _in_progress(after) <= parallel
    assert _unavailable(after) <= max(_unavailable(nodes), cap)
    if any(not by_name[n].unavailable for n in chosen):
        # A node that was available became unavailable: only within the budget.
        assert _unavailable(after) <= cap


@settings(max_examples=400, deadline=None)
@given(pools())
def test_admission_does_not_stall_while_a_start_is_allowed(
    pool: tuple[list[NodeView], int, int | str],
) -> None:
    nodes, parallel, unavailable = pool
    p = policy(maxParallelUpgrades=parallel, maxUnavailable=unavailable)
    chosen = admit(nodes, p)
    slots = math.inf if parallel == 0 else parallel - _in_progress(nodes)
    budget = max_unavailable(p, len(nodes)) - _unavailable(nodes)
    waiting = [n for n in nodes if n.state is S.UPGRADE_REQUIRED and not n.skip]
    free = [n for n in waiting if n.unavailable]
    if slots > 0 and (free or (waiting and budget > 0)):
        assert chosen
    startable = len(free) + min(max(budget, 0), len(waiting) - len(free))
    assert len(chosen) == max(0, min(slots, startable))


@settings(max_examples=200, deadline=None)
@given(pools())
def test_admitting_twice_from_the_updated_view_admits_nothing_more(
    pool: tuple[list[NodeView], int, int | str],
) -> None:
    """What a second admission sees once the cache shows the first one's writes."""
    nodes, parallel, unavailable = pool
    p = policy(maxParallelUpgrades=parallel, maxUnavailable=unavailable)
    first = admit(nodes, p)
    second = admit(_after(nodes, first), p)
    if parallel:
        assert _in_progress(_after(_after(nodes, first), second)) <= max(
            _in_progress(nodes), parallel
        )
