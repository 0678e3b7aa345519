"""The kernel pin (`DRIVER_KERNEL_PIN_LABEL`) outside a walk.

The pin decides which driver DaemonSet takes a node: the precompiled one for the pinned
kernel, or, unpinned, the per-OS one. Inside a walk the planner moves it, once the node is
cordoned and cleared (`_planner._pod_restart`). Everywhere else it simply follows what the
policy wants (the node's kernel with precompiled drivers, no pin without):

* no driver runs on the node (a new node, or one whose driver pod is gone): nothing is
  there to protect, so the node gets its driver at once;
* auto upgrade is off: the admin chose to let drivers change under running pods, as the
  reference does when a node boots another kernel or precompiled is switched.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.upgrade._model import NodeView
from components.upgrade._pods import PodView


@dataclass(frozen=True, slots=True)
class PinChange:
    value: str | None
    """The kernel to pin the node to; None removes the pin."""
    reason: str


def pin_change(
    node: NodeView, driver: PodView | None, *, precompiled: bool | None, walk_moves_it: bool
) -> PinChange | None:
    """What to do with `node`'s pin when no walk step does it.

    `precompiled`: whether the policy of the node's driver wants precompiled drivers (None
    when no policy governs the node). `walk_moves_it`: auto upgrade is on for that policy.
    """
    if precompiled is None:
        return None
    if precompiled and not node.kernel:
        return None  # no kernel label: nothing to pin to (the policy's status says so)
    want = node.kernel if precompiled else None
    if node.pinned_kernel == want:
        return None
    if driver is None or driver.terminating:
        what = f"kernel {want}" if want else "the per-OS driver"
        return PinChange(want, f"no driver runs on the node; it gets {what}")
    if walk_moves_it:
        return None  # cordoned and cleared first: the walk's pod restart moves it
    what = f"kernel {want}" if want else "the per-OS driver"
    return PinChange(want, f"driver auto upgrade is off; the node gets {what}")
