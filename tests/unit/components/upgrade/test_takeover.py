"""A node on the reference operator's driver moves to ours only through the walk: its
driver is outdated, the restart step removes the takeover label (never deletes the pod
itself), and outside a walk the label goes only when nothing of the reference's is left to
protect: never because auto upgrade is off."""

from __future__ import annotations

from dataclasses import replace

from components.api import DRIVER_TAKEOVER_LABEL, UpgradeState
from components.upgrade import NodeContext, NodeView, plan_node, transition_patch
from components.upgrade._takeover import takeover_release

from .builders import NOW, node, policy
from .builders import driver as driver_pod

S = UpgradeState


def taken(state: UpgradeState = S.UPGRADE_DONE) -> NodeView:
    return replace(node(state=state), taken_over=True)


def test_a_reference_driver_in_sync_with_its_daemonset_still_requires_an_upgrade() -> None:
    ctx = NodeContext(taken(), driver_pod("rev"), "rev", replacing=True)
    step = plan_node(ctx, policy(), NOW)
    assert step.transition is not None and step.transition.to is S.UPGRADE_REQUIRED
    assert "reference operator" in step.transition.reason
    # Its kernel is not recorded on a pod that is about to go.
    assert step.record_kernel is None
    # The same pod, its DaemonSet not fenced yet: nothing to do.
    assert (
        plan_node(NodeContext(taken(), driver_pod("rev"), "rev"), policy(), NOW).transition is None
    )


def test_the_restart_step_hands_the_node_over_by_its_label_and_never_deletes_the_pod() -> None:
    ctx = NodeContext(taken(S.POD_RESTART_REQUIRED), driver_pod("rev"), "rev", replacing=True)
    step = plan_node(ctx, policy(), NOW)
    assert not step.delete and not step.evict
    assert step.transition is not None and step.transition.release_takeover
    ops = transition_patch(ctx.node, step.transition, NOW)
    assert {
        "op": "remove",
        "path": "/metadata/labels/" + DRIVER_TAKEOVER_LABEL.replace("/", "~1"),
    } in ops
    # Label gone, the pod not yet: wait for the fenced DaemonSet's controller to delete it.
    gone = replace(ctx, node=replace(ctx.node, taken_over=False))
    after = plan_node(gone, policy(), NOW)
    assert after.empty and "reference operator" in after.wait


def test_validation_never_passes_on_the_reference_driver() -> None:
    ctx = NodeContext(taken(S.VALIDATION_REQUIRED), driver_pod("rev"), "rev", replacing=True)
    step = plan_node(ctx, policy(), NOW)
    assert step.transition is not None and step.transition.to is S.POD_RESTART_REQUIRED


BEFORE = frozenset({"rev", "older"})
"""The revisions the reference's pods ran when its DaemonSet was fenced."""


def release(
    *,
    driver: object = "live",
    revision: str = "rev",
    foreign: bool = True,
    replacing: bool = True,
    before: frozenset[str] | None = BEFORE,
) -> str | None:
    pod = None if driver is None else driver_pod(revision, terminating=driver == "terminating")
    return takeover_release(taken(), pod, foreign=foreign, replacing=replacing, before_fence=before)


def test_outside_a_walk_the_label_goes_only_when_nothing_needs_protecting() -> None:
    assert release() is None  # the walk hands it over, or the admin does
    assert release(replacing=False, before=None) is None  # not fenced yet: wait for it
    assert release(driver=None) is not None
    assert release(driver="terminating") is not None
    assert release(foreign=False, replacing=False) is not None
    assert takeover_release(node(), None, foreign=False, replacing=False, before_fence=None) is None


def test_the_reference_driver_stays_until_its_pod_is_deleted_as_with_on_delete() -> None:
    """Auto upgrade off is not a reason to move a node: the reference's pod keeps running
    (as its `OnDelete` DaemonSet keeps it) until the admin deletes it. The pod its DaemonSet
    controller then puts back runs a revision the fence did not record: the node gets ours."""
    assert release(revision="rev") is None
    assert release(revision="older") is None  # mid-way through the reference's own upgrade
    recreated = release(revision="fenced")
    assert recreated is not None and "replaces one that was deleted" in recreated
    # Fenced by an older operator (nothing recorded), or a pod without a revision: it stays.
    assert release(revision="fenced", before=None) is None
    assert release(revision="") is None
