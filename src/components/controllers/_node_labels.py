"""The node labeling controller: `nvidia.com/gpu.present` and `nvidia.com/gpu.deploy.*`.

One request per node. The labels a node should carry are a pure function of its own
labels and the active ClusterPolicy (`_labels.node_label_patch`); when they already are
right nothing is written, otherwise one merge patch of just the labels that change.
A ClusterPolicy change re-checks every GPU node (and every node that still carries our
labels); a node is re-checked when its labels change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from components.api import (
    DEPLOY_LABEL_PREFIX,
    DRIVER_DEPLOY_LABEL,
    GPU_PRESENT_LABEL,
    ClusterPolicy,
)
from components.controllers import _informers
from components.controllers._constants import (
    CLUSTER_POLICY,
    NODE,
)
from components.controllers._labels import has_gpu, node_label_patch
from components.controllers._policies import ActivePolicy
from components.operands import OPERANDS, Operand
from reconciler import (
    Controller,
    GenerationChanged,
    LabelsChanged,
    Manager,
    Object,
    Request,
    Result,
    labels_of,
    name_of,
)

log = logging.getLogger("components.controllers.nodelabels")

NAME = "node-labels"
LABEL_WORKERS = 8


def deploy_labels(policy: ClusterPolicy, operands: Sequence[Operand]) -> dict[str, bool]:
    """Every operand's deploy label -> whether the policy enables the operand.

    With `driver.useNvidiaDriverCRD` the driver comes from NVIDIADriver resources, whose
    DaemonSets select on the same label, so it stays wanted while the driver is enabled.
    """
    out = {op.deploy_label: op.enabled(policy) for op in operands if op.deploy_label}
    if DRIVER_DEPLOY_LABEL in out and policy.spec.driver.use_nvidia_driver_crd:
        out[DRIVER_DEPLOY_LABEL] = policy.spec.driver.enabled
    return out


def concerns_us(node: Object) -> bool:
    """A node whose labels we may have to write: it has a GPU, or carries our labels."""
    labels = labels_of(node)
    return (
        has_gpu(labels)
        or GPU_PRESENT_LABEL in labels
        or any(k.startswith(DEPLOY_LABEL_PREFIX) for k in labels)
    )


class NodeLabelController:
    def __init__(self, manager: Manager, *, operands: Sequence[Operand] | None = None) -> None:
        self.manager = manager
        self.client = manager.client
        self.operands: list[Operand] = list(OPERANDS if operands is None else operands)
        self._active = ActivePolicy(lambda: self.client.list(CLUSTER_POLICY))

    def setup(self) -> Controller:
        m = self.manager
        # One write per node, independent of every other: several at once, so that labelling
        # a thousand nodes takes a fraction of the round trips end to end.
        c = m.controller(NAME, self, max_concurrent_reconciles=LABEL_WORKERS)
        c.watch(_informers.nodes(m), lambda n: [Request("", name_of(n))], LabelsChanged())
        c.watch(_informers.cluster_policies(m), self._every_node, GenerationChanged())
        return c

    def _every_node(self, _: Object) -> list[Request]:
        return [Request("", name_of(n)) for n in self.client.list(NODE) if concerns_us(n)]

    def _policy(self) -> ClusterPolicy | None:
        """The active policy, parsed once per resourceVersion (one parse for 5,000 nodes)."""
        return self._active.parsed()

    async def reconcile(self, request: Request) -> Result | None:
        node = self.client.get(NODE, request.name)
        if node is None:
            return None
        policy = self._policy()
        wanted = deploy_labels(policy, self.operands) if policy is not None else None
        patch = node_label_patch(labels_of(node), wanted)
        if not patch:
            return None
        await self.client.patch(NODE, request.name, {"metadata": {"labels": patch}})
        return None
