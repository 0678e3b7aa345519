"""The takeover label (`DRIVER_TAKEOVER_LABEL`) outside a walk.

Inside a walk the planner removes it as the driver restart step, once the node is cordoned
and cleared (`_planner._hand_over`). Everywhere else, as with the kernel pin (`_pin`):

* no driver pod runs on the node, or ours does: nothing of the reference's is left there
  to protect, so the node gets our driver at once;
* driver auto upgrade is off: the admin chose to let drivers change under running pods, so
  the node is handed over at once too.

While the reference's DaemonSet is not fenced yet, the label stays: the ClusterPolicy
controller fences it right after labelling its nodes.
"""

from __future__ import annotations

from components.upgrade._model import NodeView
from components.upgrade._pods import PodView


def takeover_release(
    node: NodeView,
    driver: PodView | None,
    *,
    foreign: bool,
    replacing: bool,
    walk_moves_it: bool,
) -> str | None:
    """Why `node`'s takeover label should go now (None: it stays, or there is none).

    `foreign`: the driver pod's DaemonSet is not ours; `replacing`: and it is fenced;
    `walk_moves_it`: auto upgrade is on for the node's policy."""
    if not node.taken_over:
        return None
    if driver is None or driver.terminating:
        return "no driver pod of the reference operator runs on the node"
    if not foreign:
        return "the node's driver pod is ours"
    if replacing and not walk_moves_it:
        return "driver auto upgrade is off; the node gets our driver at once"
    return None
