"""Which labels a node should carry: pure functions of its labels and the policy.

The rules are the reference operator's (DESIGN section 3):

* `nvidia.com/gpu.present=true` on a node NFD found an NVIDIA PCI device on; `false` on a
  node that had it and has no GPU any more (its `nvidia.com/gpu.deploy.*` labels go).
* `nvidia.com/gpu.deploy.<operand>=true` for each enabled operand; the MIG manager's only
  on `nvidia.com/mig.capable=true` nodes. A value someone else set (e.g. the MIG manager's
  `paused-for-mig-change`) is never overwritten.
* `nvidia.com/gpu.deploy.operands=false` opts a node out: every other deploy label goes.
* A deploy label of an operand that is no longer enabled goes if it is ours (`true`).
* Deploy labels of operands we do not know (`nvidia.com/gpu.deploy.sandbox-*`, ...) are
  left alone, except on a node with no GPU any more.

The result is a merge patch (`None` removes a label), empty when nothing must change, so
a node that is already right costs no write.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.api import (
    DEPLOY_LABEL_PREFIX,
    GPU_PRESENT_LABEL,
    MIG_CAPABLE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    NFD_GPU_LABELS,
    NFD_PREFIX,
    OPERANDS_OPT_OUT_LABEL,
    opted_out,
)

LabelPatch = dict[str, str | None]


def has_gpu(labels: Mapping[str, str]) -> bool:
    """NFD found an NVIDIA PCI device (display or 3D controller) on the node."""
    return any(labels.get(key) == "true" for key in NFD_GPU_LABELS)


def has_nfd_labels(labels: Mapping[str, str]) -> bool:
    return any(key.startswith(NFD_PREFIX) for key in labels)


def mig_capable(labels: Mapping[str, str]) -> bool:
    return labels.get(MIG_CAPABLE_LABEL) == "true"


def node_label_patch(
    labels: Mapping[str, str], deploy_labels: Mapping[str, bool] | None
) -> LabelPatch:
    """The merge patch of `metadata.labels` that makes `labels` right.

    `deploy_labels` maps the deploy label of every operand we know to whether the operand
    is enabled; `None` means no active ClusterPolicy, and then only
    `nvidia.com/gpu.present` is kept right.
    """
    if not has_gpu(labels):
        return _no_gpu_patch(labels)
    patch: LabelPatch = {}
    if labels.get(GPU_PRESENT_LABEL) != "true":
        patch[GPU_PRESENT_LABEL] = "true"
    if deploy_labels is None:
        return patch
    out = opted_out(labels)
    for key, enabled in sorted(deploy_labels.items()):
        wanted = enabled and not out and (key != MIG_MANAGER_DEPLOY_LABEL or mig_capable(labels))
        value = labels.get(key)
        if wanted and not value:
            patch[key] = "true"
        elif not wanted and value is not None and (out or value == "true"):
            patch[key] = None
    return patch


def _no_gpu_patch(labels: Mapping[str, str]) -> LabelPatch:
    """A node without a GPU: nothing of ours, and `gpu.present=false` if it said true."""
    if GPU_PRESENT_LABEL not in labels:
        return {}  # never was a GPU node (or already cleaned): CPU nodes are not written
    patch: LabelPatch = {
        key: None
        for key in labels
        if key.startswith(DEPLOY_LABEL_PREFIX) and key != OPERANDS_OPT_OUT_LABEL
    }
    if labels[GPU_PRESENT_LABEL] != "false":
        patch[GPU_PRESENT_LABEL] = "false"
    return patch
