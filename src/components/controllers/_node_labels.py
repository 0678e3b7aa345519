"""The node labeling controller: `nvidia.com/gpu.present`, `nvidia.com/gpu.deploy.*` and
the annotation `nvidia.com/gpu-driver-upgrade-enabled`.

One request per node. The labels a node should carry are a pure function of its own
labels and the active ClusterPolicy, or the GPUCluster where it is the stack
(`_labels.node_label_patch`); when they already are
right nothing is written, otherwise one strategic merge patch of just what changes.
A ClusterPolicy or GPUCluster change re-checks every GPU node (and every node that still carries our
labels); a node is re-checked when its labels change.
"""

from __future__ import annotations

import logging

from components.api import DEPLOY_LABEL_PREFIX, GPU_PRESENT_LABEL
from components.controllers import _informers
from components.controllers._constants import (
    CLUSTER_POLICY,
    NODE,
)
from components.controllers._labels import (
    LabelPolicy,
    annotation_patch,
    has_gpu,
    host_driver,
    node_label_patch,
)
from components.controllers._policies import STACK_CHANGED, ActivePolicy, Stacks
from reconciler import (
    Controller,
    Funcs,
    GenerationChanged,
    LabelsChanged,
    Manager,
    Object,
    Or,
    PatchType,
    Request,
    Result,
    annotations_of,
    labels_of,
    name_of,
)

log = logging.getLogger("components.controllers.nodelabels")

NAME = "node-labeling-controller"
LABEL_WORKERS = 32
"""Node label writes in flight at once. A new policy's DaemonSets wait for every node's
labels (`_label_wait`), so this phase is on the rollout's path; each write is a round trip
of ~50 ms on a busy API server, not CPU of ours. At 8, 1,000 nodes took 4.5 s; at 32, 3.5 s."""


def concerns_us(node: Object) -> bool:
    """A node whose labels we may have to write: it has a GPU, or carries our labels."""
    labels = labels_of(node)
    return (
        has_gpu(labels)
        or GPU_PRESENT_LABEL in labels
        or any(k.startswith(DEPLOY_LABEL_PREFIX) for k in labels)
    )


def _host_driver_changed(old: Object, new: Object) -> bool:
    return host_driver(old.get("status") or {}) != host_driver(new.get("status") or {})


class NodeLabelController:
    def __init__(self, manager: Manager, stacks: Stacks | None = None) -> None:
        self.manager = manager
        self.client = manager.client
        self._active = ActivePolicy(lambda: self.client.list(CLUSTER_POLICY))
        self.stacks = stacks

    def setup(self) -> Controller:
        m = self.manager
        # One write per node, independent of every other: several at once, so that labelling
        # a thousand nodes takes a fraction of the round trips end to end.
        c = m.controller(NAME, self, max_concurrent_reconciles=LABEL_WORKERS)
        c.watch(
            _informers.nodes(m),
            lambda n: [Request("", name_of(n))],
            Or(LabelsChanged(), Funcs(update=_host_driver_changed)),
            map_old=False,
        )
        c.watch(_informers.cluster_policies(m), self._every_node, GenerationChanged())
        if self.stacks is not None and self.stacks.served:
            # Created, deleted, or its refusal settled (its status): which stack is on.
            c.watch(_informers.gpu_clusters(m), self._every_node, STACK_CHANGED, map_old=False)
        return c

    def _every_node(self, _: Object) -> list[Request]:
        return [Request("", name_of(n)) for n in self.client.list(NODE) if concerns_us(n)]

    def _policy(self) -> LabelPolicy | None:
        """What the active policy says of labels, parsed once per resourceVersion (one
        parse for 5,000 nodes)."""
        if self.stacks is not None and self.stacks.active_gpu_cluster() is not None:
            return LabelPolicy(dra=True)
        policy = self._active.parsed()
        return LabelPolicy.of(policy) if policy is not None else None

    async def reconcile(self, request: Request) -> Result | None:
        node = self.client.get(NODE, request.name)
        if node is None:
            return None
        policy = self._policy()
        labels = labels_of(node)
        patch = node_label_patch(labels, policy, host_driver=host_driver(node.get("status") or {}))
        after = {k: v for k, v in {**labels, **patch}.items() if v is not None}
        annotations = annotations_of(node)
        notes = annotation_patch(after, annotations, policy)
        if not patch and not notes:
            return None
        meta: dict[str, object] = {}
        if patch:
            meta["labels"] = patch
        if notes:
            meta["annotations"] = notes
        await self.client.patch(
            NODE,
            request.name,
            {"metadata": meta},
            patch_type=PatchType.STRATEGIC_MERGE,
            whole_answer=False,
        )
        return None
