"""The takeover label (`DRIVER_TAKEOVER_LABEL`) outside a walk.

Inside a walk the planner removes it as the driver restart step, once the node is cordoned
and cleared (`_planner._hand_over`). Everywhere else it goes only when nothing of the
reference's is left there to protect:

* no driver pod runs on the node, or its driver pod is terminating, or it is ours;
* the reference's pod there was created after its DaemonSet was fenced (its revision is
  none of those the fence recorded): the one from before was deleted, by the admin or for
  failing, and the DaemonSet controller put a new one in its place. That is how the
  reference's own `OnDelete` driver DaemonSet is restarted: the admin drains the node and
  deletes its driver pod, and the pod that comes back runs the new template; here, ours.
  (The new pod is looked at, not only the deleted one's termination: the DaemonSet
  controller may create it before this reconcile sees the old one go.)

With auto upgrade off nothing else moves a node: its driver pod keeps running, as the
reference's `OnDelete` pods do until the admin deletes them, and the policy's
`DriverTakeover` condition says how to proceed. Auto upgrade on walks the nodes within the
limits. While the reference's DaemonSet is not fenced yet, the label stays: the
ClusterPolicy controller fences it right after labelling its nodes.
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
    before_fence: frozenset[str] | None,
) -> str | None:
    """Why `node`'s takeover label should go now (None: it stays, or there is none).

    `foreign`: the driver pod's DaemonSet is not ours; `replacing`: and it is fenced;
    `before_fence`: the revisions that DaemonSet's pods ran when it was fenced (None: not
    recorded, `components.api.revisions_before_fence`)."""
    if not node.taken_over:
        return None
    if driver is None or driver.terminating:
        return "no driver pod of the reference operator runs on the node"
    if not foreign:
        return "the node's driver pod is ours"
    if replacing and before_fence is not None and driver.revision not in before_fence | {""}:
        return (
            f"the reference operator's driver pod {driver.key} replaces one that was deleted; "
            "the node gets our driver instead"
        )
    return None
