"""config/rbac on a real API server (RBAC authorization on): it installs, and the operator's
ServiceAccount may do exactly what the operator needs, and no more."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.unit.components.api.cases import REPO
from tests.unit.components.operands.test_operand_rbac import every_operand_role

pytestmark = pytest.mark.integration

RBAC = REPO / "config" / "rbac"
# Installed under names of its own, so it cannot collide with other tests on the shared
# control plane that deploy the operator into `gpu-operator`.
NAMESPACE = "rbac-check"
NAME = "rbac-check-gpu-operator"
ACCOUNT = f"system:serviceaccount:{NAMESPACE}:{NAME}"


def renamed(
    document: dict[str, Any], namespace: str = NAMESPACE, name: str = NAME
) -> dict[str, Any]:
    """The document with our namespace and name (the files use gpu-operator for both)."""
    text = yaml.safe_dump(document)
    out: dict[str, Any] = yaml.safe_load(
        text.replace("namespace: gpu-operator", f"namespace: {namespace}").replace(
            "name: gpu-operator", f"name: {name}"
        )
    )
    return out


async def apply_rbac(api: client.ApiClient, namespace: str = NAMESPACE, name: str = NAME) -> None:
    """config/rbac in `namespace` (created), every object's name starting with `name`: the
    operator's ServiceAccount is `name`."""
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    try:
        await core.create_namespace({"metadata": {"name": namespace}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    creators: dict[str, Any] = {
        "ServiceAccount": lambda body: core.create_namespaced_service_account(namespace, body),
        "ClusterRole": rbac.create_cluster_role,
        "ClusterRoleBinding": rbac.create_cluster_role_binding,
        "Role": lambda body: rbac.create_namespaced_role(namespace, body),
        "RoleBinding": lambda body: rbac.create_namespaced_role_binding(namespace, body),
    }
    for path in sorted(RBAC.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            try:
                await creators[document["kind"]](renamed(document, namespace, name))
            except ApiException as exc:
                if exc.status != 409:
                    raise


async def can(
    api: client.ApiClient,
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str | None = None,
    subresource: str | None = None,
) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": ACCOUNT,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                **({"namespace": namespace} if namespace else {}),
                **({"subresource": subresource} if subresource else {}),
            },
        },
    }
    result = await client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(result.status.allowed)


ALLOWED = [
    ("patch", "nodes", "", None, None),
    # Held only to be granted: a role can grant only what its creator holds.
    ("update", "nodes", "", None, None),
    ("create", "pods", "", NAMESPACE, None),
    ("watch", "nodes", "", None, None),
    ("delete", "pods", "", "some-team", None),
    ("create", "pods", "", "some-team", "eviction"),
    ("watch", "poddisruptionbudgets", "policy", None, None),
    ("create", "events", "", "default", None),
    ("create", "runtimeclasses", "node.k8s.io", None, None),
    ("create", "clusterroles", "rbac.authorization.k8s.io", None, None),
    ("list", "customresourcedefinitions", "apiextensions.k8s.io", None, None),
    ("watch", "clusterpolicies", "nvidia.com", None, None),
    ("patch", "clusterpolicies", "nvidia.com", None, "status"),
    ("update", "nvidiadrivers", "nvidia.com", None, "finalizers"),
    ("patch", "daemonsets", "apps", NAMESPACE, None),
    ("list", "controllerrevisions", "apps", NAMESPACE, None),
    ("create", "configmaps", "", NAMESPACE, None),
    ("update", "leases", "coordination.k8s.io", NAMESPACE, None),
    ("create", "servicemonitors", "monitoring.coreos.com", NAMESPACE, None),
    # Secure /metrics: who is this scraper, and may they get /metrics?
    ("create", "tokenreviews", "authentication.k8s.io", None, None),
    ("create", "subjectaccessreviews", "authorization.k8s.io", None, None),
]

DENIED = [
    ("get", "secrets", "", NAMESPACE, None),
    ("delete", "nodes", "", None, None),
    ("create", "pods", "", "kube-system", None),
    ("create", "daemonsets", "apps", "kube-system", None),
    ("delete", "controllerrevisions", "apps", NAMESPACE, None),
    ("create", "configmaps", "", "kube-system", None),
    ("delete", "clusterpolicies", "nvidia.com", None, None),
    ("create", "customresourcedefinitions", "apiextensions.k8s.io", None, None),
    ("escalate", "clusterroles", "rbac.authorization.k8s.io", None, None),
    ("bind", "clusterroles", "rbac.authorization.k8s.io", None, None),
]


@pytest.mark.parametrize(("verb", "resource", "group", "namespace", "sub"), ALLOWED)
async def test_the_operator_may(
    api_client: client.ApiClient,
    verb: str,
    resource: str,
    group: str,
    namespace: str | None,
    sub: str | None,
) -> None:
    await apply_rbac(api_client)
    assert await can(api_client, verb, resource, group=group, namespace=namespace, subresource=sub)


@pytest.mark.parametrize(("verb", "resource", "group", "namespace", "sub"), DENIED)
async def test_the_operator_may_not(
    api_client: client.ApiClient,
    verb: str,
    resource: str,
    group: str,
    namespace: str | None,
    sub: str | None,
) -> None:
    await apply_rbac(api_client)
    assert not await can(
        api_client, verb, resource, group=group, namespace=namespace, subresource=sub
    )


async def test_the_operator_may_create_every_role_its_operands_need(
    api_client: client.ApiClient,
) -> None:
    """The API server's escalation check, as the operator's ServiceAccount meets it: each
    Role and ClusterRole an operand renders is created (dry run) while impersonating the
    account. A rule the operator does not hold is a 403 here, and a stuck policy in a
    real cluster."""
    await apply_rbac(api_client)
    configuration = api_client.configuration
    async with client.ApiClient(configuration) as impersonating:
        impersonating.set_default_header("Impersonate-User", ACCOUNT)
        rbac = client.RbacAuthorizationV1Api(impersonating)
        created = 0
        for obj in every_operand_role(NAMESPACE):
            body = {**obj, "metadata": {"name": obj["metadata"]["name"] + "-rbac-check"}}
            if obj["kind"] == "ClusterRole":
                await rbac.create_cluster_role(body, dry_run="All")
            else:
                await rbac.create_namespaced_role(NAMESPACE, body, dry_run="All")
            created += 1
        assert created >= 15
