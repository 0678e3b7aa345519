"""Creating a stack's DaemonSets (a ClusterPolicy's or a GPUCluster's) after the node labels
they select on, not before.

A DaemonSet created while its nodes' deploy labels are still being written gets pods on
the nodes labelled so far; the DaemonSet controller comes back for the others only after it
has observed those pods and worked through every other DaemonSet queued before it. On a
fresh 100-node policy that left a tail of driver, toolkit and validator pods created 5-6 s
after the rest, and every operand on those nodes waited for their driver: a rollout 1.2x as
long as the same DaemonSets created on labelled nodes. The reference operator labels every
node in its reconcile before applying any state, so its DaemonSets never see a half-labelled
cluster either.

So while some node still lacks labels the label controller will write (the same pure
function, `_labels.node_label_patch`, read from the same cache), a DaemonSet that does not
exist yet is not created; everything else (prerequisites, updates of existing DaemonSets)
goes on. The node event that brings the last missing labels asks for the next reconcile at
once (`landed`), not at the policy's paced turn, a second or more later. The wait is
bounded: a node whose labels cannot be written (a webhook refusing them, say) must not hold
a cluster's operands back for long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Final

from components.api import ClusterPolicy
from components.controllers._labels import LabelPolicy, host_driver, node_label_patch
from reconciler import Object, labels_of, name_of

log = logging.getLogger("components.controllers.clusterpolicy")

LABEL_WAIT_SECONDS: Final = 30.0
"""New DaemonSets wait at most this long for the node labels. Labelling 1,000 nodes took
25 s in a rollout where the API server was also busy creating 7,000 pods."""


def lacks_labels(node: Object, wanted: LabelPolicy) -> bool:
    """The label controller still has a label write for this node."""
    status = node.get("status") or {}
    return bool(node_label_patch(labels_of(node), wanted, host_driver=host_driver(status)))


def nodes_awaiting_labels(nodes: Iterable[Object], policy: ClusterPolicy) -> list[str]:
    """The nodes the label controller still has a label write for, by name."""
    wanted = LabelPolicy.of(policy)
    return [name_of(node) for node in nodes if lacks_labels(node, wanted)]


class LabelWait:
    """Whether new DaemonSets wait for node labels now, and for how long at most.

    The clock starts when a reconcile first finds unlabelled nodes and stops when none are
    left; after `LABEL_WAIT_SECONDS` new DaemonSets are created on whatever is labelled."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._since: float | None = None
        self._warned = False
        self._awaiting: set[str] = set()
        """The nodes new DaemonSets wait for, while they do."""
        self._wanted: LabelPolicy | None = None

    def remaining(self, nodes: Iterable[Object], stack: ClusterPolicy | LabelPolicy) -> float:
        """Seconds new DaemonSets should still wait (0: create them now); `stack`: the
        policy the labels come from, or (a GPUCluster's) the labels wanted."""
        wanted = stack if isinstance(stack, LabelPolicy) else LabelPolicy.of(stack)
        self._wanted = wanted
        waiting = [name_of(node) for node in nodes if lacks_labels(node, wanted)]
        self._awaiting = set()
        if not waiting:
            self._since = None
            self._warned = False
            return 0.0
        now = self._clock()
        if self._since is None:
            self._since = now
        left = self._since + LABEL_WAIT_SECONDS - now
        if left <= 0:
            if not self._warned:
                self._warned = True
                log.warning(
                    "creating DaemonSets although %d nodes still lack their labels after %.0fs "
                    "(first: %s); see the node-labeling controller's errors",
                    len(waiting),
                    LABEL_WAIT_SECONDS,
                    ", ".join(sorted(waiting)[:3]),
                )
            return 0.0
        log.debug("new DaemonSets wait for the labels of %d nodes", len(waiting))
        self._awaiting = set(waiting)
        return left

    def landed(self, node: Object, current: Callable[[str], Object | None]) -> bool:
        """A node changed or went (`current(name)`: a node as the cache has it now, None
        once deleted): whether no node new DaemonSets wait for lacks its labels any more,
        this one being one of them. Reads only: the wait is the reconcile's to change
        (`remaining`), a watch only asks it."""
        name = name_of(node)
        wanted = self._wanted
        if name not in self._awaiting or wanted is None:
            return False
        if current(name) is not None and lacks_labels(node, wanted):
            return False
        # Stops at the first node still lacking: short while many do.
        return not any(
            (other := current(n)) is not None and lacks_labels(other, wanted)
            for n in self._awaiting
            if n != name
        )
