"""What the GPUCluster's DRA operands share: their section of the stack, the labels the
reference gives their objects, RBAC whose role and account names differ, and their
DaemonSets (rolled out all at once, as the reference's are)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from components.api import ClusterPolicy, DRADriverSpec, DRAStackSpec
from components.operands._context import Ctx
from components.operands._pods import tolerations

#: The API version of DeviceClass and ResourceClaimTemplate: `resource.k8s.io/v1`, GA
#: since Kubernetes 1.34, the oldest the GPUCluster stack supports (1.34.2).
RESOURCE_API = "resource.k8s.io/v1"
#: The DeviceClass of whole compute GPUs the DRA driver publishes.
GPU_CLASS = "gpu.nvidia.com"
#: What every pod of the stack does not start without; the reference's default.
DEFAULT_PRIORITY_CLASS = "system-node-critical"
#: The nodes the reference lets the DRA DaemonSets onto, besides their deploy label: NFD
#: saw an NVIDIA PCI device, an NVIDIA CPU (Grace), or the operator said GPU.
GPU_NODE_TERMS: tuple[tuple[str, str], ...] = (
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
    ("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
    ("nvidia.com/gpu.present", "true"),
)
_RESERVED_POD_LABELS = frozenset({"app", "app.kubernetes.io/part-of"})


def on_dra_stack(policy: ClusterPolicy) -> bool:
    """Whether the policy is a GPUCluster's (`components.api.dra_stack`)."""
    return isinstance(policy.spec, DRAStackSpec)


def dra_section(ctx: Ctx) -> DRADriverSpec:
    """The GPUCluster's `draDriver` section (only asked of a GPUCluster's render)."""
    spec = ctx.spec
    assert isinstance(spec, DRAStackSpec), "a DRA operand renders from a GPUCluster only"
    return spec.dra_driver


def node_affinity(terms: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Required node affinity: any one of `terms` (label, value)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}]}
                    for k, v in terms
                ]
            }
        }
    }


def role_for(
    ctx: Ctx,
    name: str,
    account: str,
    rules: Sequence[Mapping[str, Any]],
    *,
    cluster: bool = False,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A Role (or ClusterRole) `name` and its binding of the same name to `account`."""
    kind = "ClusterRole" if cluster else "Role"
    group = "rbac.authorization.k8s.io"
    return [
        {
            "apiVersion": f"{group}/v1",
            "kind": kind,
            "metadata": ctx.meta(name, namespaced=not cluster, labels=labels),
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": f"{group}/v1",
            "kind": f"{kind}Binding",
            "metadata": ctx.meta(name, namespaced=not cluster, labels=labels),
            "roleRef": {"apiGroup": group, "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ctx.namespace}],
        },
    ]


def account(ctx: Ctx, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ctx.meta(name, labels=labels)}


def pod_basics(ctx: Ctx, *, account: str) -> dict[str, Any]:
    """The fields every DRA pod has: its account and priority class, the stack's
    tolerations."""
    return {
        "priorityClassName": ctx.spec.daemonsets.priority_class_name or DEFAULT_PRIORITY_CLASS,
        "serviceAccountName": account,
        "tolerations": tolerations(ctx.spec),
    }


def workload_meta(
    ctx: Ctx, labels: Mapping[str, str], pod_labels: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The object's metadata and its pod template's, with `daemonsets.labels` and
    `annotations` on both (never overriding the pod's `app` labels, which select it)."""
    shared = ctx.spec.daemonsets
    annotations = dict(shared.annotations)
    meta = ctx.meta(
        str(labels["app"]), labels={**shared.labels, **labels}, annotations=annotations or None
    )
    template_labels = {k: v for k, v in shared.labels.items() if k not in _RESERVED_POD_LABELS}
    template: dict[str, Any] = {"labels": ctx.labels({**template_labels, **pod_labels})}
    if annotations:
        template["annotations"] = annotations
    return meta, template


def workload(
    ctx: Ctx,
    kind: Literal["DaemonSet", "Deployment"],
    *,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    pod: dict[str, Any],
    pod_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An apps/v1 `kind` named by `labels["app"]` running `pod`, whose pods carry
    `pod_labels` (by default the object's own). A DaemonSet replaces every
    pod at once (the reference's `maxUnavailable: 100%`: a DRA plugin is not served by
    halves); a Deployment (the controller) runs one replica."""
    meta, template = workload_meta(ctx, labels, labels if pod_labels is None else pod_labels)
    rollout: dict[str, Any] = (
        {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}}}
        if kind == "DaemonSet"
        else {"replicas": 1}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": meta,
        "spec": {
            **rollout,
            "selector": {"matchLabels": dict(selector)},
            "template": {"metadata": template, "spec": pod},
        },
    }


def all_gpus_template(ctx: Ctx, name: str, request: str) -> dict[str, Any]:
    """A ResourceClaimTemplate `name` for every compute GPU of the node its pod lands on,
    with admin access: a monitor sees the GPUs workloads hold and takes none from them.
    The namespace needs the admin-access label, which the GPUCluster controller sets."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": ctx.meta(name),
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": request,
                            "exactly": {
                                "deviceClassName": GPU_CLASS,
                                "allocationMode": "All",
                                "adminAccess": True,
                            },
                        }
                    ]
                }
            }
        },
    }


def claim_gpus(pod: dict[str, Any], container: dict[str, Any], template: str, claim: str) -> None:
    """Give `container` the GPUs of the pod's claim `claim` made from `template` (in place;
    after the section's `resources`, which would otherwise replace the container's claims)."""
    pod["resourceClaims"] = [{"name": claim, "resourceClaimTemplateName": template}]
    container.setdefault("resources", {})["claims"] = [{"name": claim}]
