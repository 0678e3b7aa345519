"""`state-dra-validation`: the GPUCluster's validator (the reference's
`state-dra-validation` manifests, facts only).

A DaemonSet `nvidia-dra-validator` on nodes labelled `nvidia.com/gpu.deploy.dra-validator`
(and `nvidia.com/gpu.present=true`) whose pod claims one GPU through the
ResourceClaimTemplate `nvidia-dra-validator-gpu` (class `gpu.nvidia.com`, exactly one
device, admin access: it never takes a GPU from a workload). The claim is the check: the
pod is scheduled only once the DRA driver publishes the node's GPUs, and its init container
lists the GPU the driver injected (`nvidia-smi -L`). Its pods carry `app:
nvidia-operator-validator`, the label the driver upgrade waits on after a restart, as the
reference's do. Admin access needs the namespace label `resource.kubernetes.io/admin-access`,
which the GPUCluster controller sets.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import Rendered
from components.operands._dra import (
    GPU_CLASS,
    RESOURCE_API,
    account,
    node_affinity,
    on_dra_stack,
    pod_basics,
    workload,
)
from components.operands._names import deploy_label

NAME = "nvidia-dra-validator"
TEMPLATE = "nvidia-dra-validator-gpu"
CLAIM = "validation-gpu"
#: The pods' `app`: the validator's, which the upgrade's validation gate selects.
POD_APP = "nvidia-operator-validator"


class DRAValidation(BaseOperand):
    """The DRA validator: its account, its GPU claim's template and its DaemonSet."""

    name = "state-dra-validation"
    deploy_label = deploy_label("dra-validator")

    def enabled(self, policy: ClusterPolicy) -> bool:
        return on_dra_stack(policy)

    def _render(self, ctx: Ctx) -> Rendered:
        labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": NAME}
        init, main = _containers(ctx)
        pod: dict[str, Any] = {
            **pod_basics(ctx, account=NAME),
            "priorityClassName": "system-node-critical",
            "nodeSelector": {self.deploy_label: "true"},
            # Compute GPUs only: a passthrough GPU is `vfio.gpu.nvidia.com`, never this class.
            "affinity": node_affinity((("nvidia.com/gpu.present", "true"),)),
            "resourceClaims": [{"name": CLAIM, "resourceClaimTemplateName": TEMPLATE}],
            "initContainers": [init],
            "containers": [main],
        }
        secrets = ctx.spec.validator.image_pull_secrets
        if secrets:
            pod["imagePullSecrets"] = [{"name": s} for s in secrets]
        daemonset_ = workload(
            ctx,
            "DaemonSet",
            labels={**labels, "app": NAME},
            pod_labels={**labels, "app": POD_APP},
            selector={"app.kubernetes.io/name": NAME},
            pod=pod,
        )
        return Rendered(objects=[account(ctx, NAME, labels), _claim_template(ctx), daemonset_])


def _claim_template(ctx: Ctx) -> dict[str, Any]:
    """One whole GPU, with admin access: the check never takes a GPU from a workload."""
    request = {
        "name": CLAIM,
        "exactly": {
            "deviceClassName": GPU_CLASS,
            "allocationMode": "ExactCount",
            "count": 1,
            "adminAccess": True,
        },
    }
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": ctx.meta(TEMPLATE),
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def _containers(ctx: Ctx) -> tuple[dict[str, Any], dict[str, Any]]:
    """The init container that uses the claimed GPU, and the one that keeps the pod up."""
    image = ctx.validator_image
    init: dict[str, Any] = {
        "name": "gpu-validation",
        "image": image,
        # nvidia-smi comes with the claimed GPU (CDI), not with the image.
        "command": ["sh", "-c", "nvidia-smi -L"],
        "resources": {"claims": [{"name": CLAIM}]},
    }
    main: dict[str, Any] = {
        "name": NAME,
        "image": image,
        "command": [
            "sh",
            "-c",
            "echo all validations are successful; while true; do sleep 86400; done",
        ],
    }
    pull = ctx.spec.validator.image_pull_policy
    if pull:
        init["imagePullPolicy"] = pull
        main["imagePullPolicy"] = pull
    return init, main
