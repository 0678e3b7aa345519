"""Raw-dict API calls for the DRA tests."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from gpusim import DRA_DRIVER
from tests.e2e.sim._kube import call

SLEEPER = "registry.k8s.io/pause:3.10"


async def create(api: Any, obj: dict[str, Any]) -> Any:
    """Create an object (a test's) with the matching typed call."""
    kind = obj["kind"]
    namespace = obj["metadata"].get("namespace", "")
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    resource, admission = client.ResourceV1Api(api), client.AdmissionregistrationV1Api(api)
    calls: dict[str, Any] = {
        "Namespace": core.create_namespace,
        "ServiceAccount": lambda body, **kw: core.create_namespaced_service_account(
            namespace, body, **kw
        ),
        "ClusterRole": rbac.create_cluster_role,
        "ClusterRoleBinding": rbac.create_cluster_role_binding,
        "DeviceClass": resource.create_device_class,
        "ValidatingAdmissionPolicy": admission.create_validating_admission_policy,
        "ValidatingAdmissionPolicyBinding": admission.create_validating_admission_policy_binding,
        "DaemonSet": lambda body, **kw: client.AppsV1Api(api).create_namespaced_daemon_set(
            namespace, body, **kw
        ),
        "ResourceClaimTemplate": lambda body, **kw: (
            resource.create_namespaced_resource_claim_template(namespace, body, **kw)
        ),
        "ResourceClaim": lambda body, **kw: resource.create_namespaced_resource_claim(
            namespace, body, **kw
        ),
        "Pod": lambda body, **kw: core.create_namespaced_pod(namespace, body, **kw),
    }
    return await call(calls[kind], obj)


async def gpu_slices(api: Any) -> dict[str, list[dict[str, Any]]]:
    """The `gpu.nvidia.com` ResourceSlices, by node."""
    listed = await call(
        client.ResourceV1Api(api).list_resource_slice, field_selector=f"spec.driver={DRA_DRIVER}"
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for item in listed.get("items") or []:
        out.setdefault(item["spec"].get("nodeName", ""), []).append(item)
    return out


def claim_template(
    name: str, device_class: str = "gpu.nvidia.com", cel: str = ""
) -> dict[str, Any]:
    """One device of `device_class` per claim made from it (matching `cel`, when given)."""
    request: dict[str, Any] = {"deviceClassName": device_class, "count": 1}
    if cel:
        request["selectors"] = [{"cel": {"expression": cel}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}},
    }
