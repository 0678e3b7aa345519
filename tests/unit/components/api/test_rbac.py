"""config/rbac: least privilege, said out loud."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.unit.components.api.cases import REPO

pytestmark = pytest.mark.unit
RBAC = REPO / "config" / "rbac"


def all_documents() -> list[dict[str, Any]]:
    out = []
    for path in sorted(RBAC.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out.extend(yaml.safe_load_all(path.read_text()))
    return out


def admission_policies() -> dict[tuple[str, str], dict[str, Any]]:
    """The admission policies and their bindings, by (kind, name)."""
    return {
        (d["kind"], d["metadata"]["name"]): d
        for d in all_documents()
        if d["apiVersion"].startswith("admissionregistration.k8s.io/")
    }


def documents() -> dict[str, dict[str, Any]]:
    """The operator's own objects (named gpu-operator), by kind."""
    return {d["kind"]: d for d in all_documents() if d["metadata"]["name"] == "gpu-operator"}


def rules(kind: str) -> list[dict[str, Any]]:
    return list(documents()[kind]["rules"])


def allowed(kind: str, group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules(kind):
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_kustomization_lists_every_file() -> None:
    listed = yaml.safe_load((RBAC / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(
        p.name for p in RBAC.glob("*.yaml") if p.name != "kustomization.yaml"
    )


@pytest.mark.parametrize("kind", ["ClusterRole", "Role"])
def test_no_wildcards(kind: str) -> None:
    for rule in rules(kind):
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert "nonResourceURLs" not in rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


def test_no_rule_in_config_rbac_has_a_wildcard() -> None:
    """Every rule of every role in config/rbac (the chart copies them), not only the
    operator's: a `*` anywhere grants what nobody reviewed."""
    checked = 0
    for document in all_documents():
        for rule in document.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "nonResourceURLs", "resourceNames"):
                values = rule.get(key, [])
                assert not any("*" in value for value in values), (document["kind"], rule)
            assert rule["verbs"], rule
            checked += 1
    assert checked > 20


def test_scrapers_may_only_get_metrics() -> None:
    (reader,) = [
        d for d in all_documents() if d["metadata"]["name"] == "gpu-operator-metrics-reader"
    ]
    assert reader["kind"] == "ClusterRole"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


@pytest.mark.parametrize("name", ["cluster_role.yaml", "role.yaml"])
def test_every_rule_says_why(name: str) -> None:
    lines = (RBAC / name).read_text().splitlines()
    for number, line in enumerate(lines):
        if line.strip().startswith("- apiGroups:"):
            assert lines[number - 1].strip().startswith("#"), f"{name}:{number + 1} has no comment"


GRANTS: list[tuple[str, str, str, set[str]]] = [
    # update: only to grant it to the driver and MIG managers (their images update nodes)
    ("ClusterRole", "", "nodes", {"get", "list", "watch", "patch", "update"}),
    # only to grant it to the node agent (its node's conditions)
    ("ClusterRole", "", "nodes/status", {"patch"}),
    # get only, to grant it to the driver manager (its drain reads a DaemonSet pod's DaemonSet)
    ("ClusterRole", "apps", "daemonsets", {"get"}),
    # patch: only to grant it to the GPUCluster's compute-domain daemon
    ("ClusterRole", "", "pods", {"get", "list", "watch", "delete", "patch"}),
    ("ClusterRole", "", "pods/eviction", {"create"}),
    ("ClusterRole", "policy", "poddisruptionbudgets", {"get", "list", "watch"}),
    ("ClusterRole", "", "events", {"create", "patch"}),
    ("ClusterRole", "events.k8s.io", "events", {"create", "patch"}),
    # Writes are server-side applies and patches: no `update` (PUT) but where granted.
    (
        "ClusterRole",
        "node.k8s.io",
        "runtimeclasses",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    (
        "ClusterRole",
        "rbac.authorization.k8s.io",
        "clusterroles",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    (
        "ClusterRole",
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    ("ClusterRole", "apiextensions.k8s.io", "customresourcedefinitions", {"list", "watch"}),
    # Read only: nothing of the operator writes a policy but its status.
    ("ClusterRole", "nvidia.com", "clusterpolicies", {"get", "list", "watch"}),
    ("ClusterRole", "nvidia.com", "nvidiadrivers", {"get", "list", "watch"}),
    ("ClusterRole", "nvidia.com", "clusterpolicies/status", {"patch"}),
    ("ClusterRole", "nvidia.com", "nvidiadrivers/status", {"patch"}),
    ("ClusterRole", "nvidia.com", "clusterpolicies/finalizers", {"update"}),
    ("ClusterRole", "nvidia.com", "nvidiadrivers/finalizers", {"update"}),
    # patch: the GPUCluster's one finalizer
    ("ClusterRole", "nvidia.com", "gpuclusters", {"get", "list", "watch", "patch"}),
    ("ClusterRole", "nvidia.com", "gpuclusters/status", {"patch"}),
    ("ClusterRole", "nvidia.com", "gpuclusters/finalizers", {"update"}),
    ("ClusterRole", "resource.k8s.io", "resourceclaims", {"get", "list", "watch"}),
    (
        "ClusterRole",
        "resource.k8s.io",
        "deviceclasses",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    # only to grant it to the DRA kubelet plugin
    (
        "ClusterRole",
        "resource.k8s.io",
        "resourceslices",
        {"get", "list", "watch", "create", "update", "delete"},
    ),
    (
        "ClusterRole",
        "resource.k8s.io",
        "resourceclaimtemplates",
        {"get", "list", "watch", "create", "update", "patch", "delete"},
    ),
    # get, patch and delete by name only (resourceslices-policy-nvidia-dra-driver)
    (
        "ClusterRole",
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        {"list", "watch", "create", "get", "patch", "delete"},
    ),
    (
        "ClusterRole",
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        {"list", "watch", "create", "get", "patch", "delete"},
    ),
    # only to grant them to the DRA driver's compute-domain parts
    (
        "ClusterRole",
        "resource.nvidia.com",
        "computedomains",
        {"get", "list", "watch", "create", "update", "patch"},
    ),
    (
        "ClusterRole",
        "resource.nvidia.com",
        "computedomains/status",
        {"get", "list", "watch", "create", "update", "patch"},
    ),
    (
        "ClusterRole",
        "resource.nvidia.com",
        "computedomaincliques",
        {"get", "list", "watch", "create", "update", "patch"},
    ),
    ("ClusterRole", "coordination.k8s.io", "leases", {"get", "create", "update"}),
    ("ClusterRole", "authentication.k8s.io", "tokenreviews", {"create"}),
    ("ClusterRole", "authorization.k8s.io", "subjectaccessreviews", {"create"}),
    # update: only to grant it to the compute-domain controller's Role
    (
        "Role",
        "apps",
        "daemonsets",
        {"get", "list", "watch", "create", "patch", "delete", "update"},
    ),
    (
        "Role",
        "apps",
        "deployments",
        {"get", "list", "watch", "create", "update", "patch", "delete"},
    ),
    ("Role", "apps", "controllerrevisions", {"get", "list", "watch"}),
    ("Role", "", "configmaps", {"get", "list", "watch", "create", "patch", "delete"}),
    ("Role", "", "secrets", {"get"}),
    ("Role", "", "services", {"get", "list", "watch", "create", "patch", "delete"}),
    ("Role", "", "serviceaccounts", {"get", "list", "watch", "create", "patch", "delete"}),
    (
        "Role",
        "rbac.authorization.k8s.io",
        "roles",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    (
        "Role",
        "rbac.authorization.k8s.io",
        "rolebindings",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
    # spec.psa.enabled: its own namespace object (a Role reaches no other)
    ("Role", "", "namespaces", {"get", "patch"}),
    ("Role", "coordination.k8s.io", "leases", {"get", "create", "update"}),
    # only to grant it to the validator's Role (its check pods)
    ("Role", "", "pods", {"create"}),
    # only to grant it to GPU feature discovery's Role
    ("Role", "nfd.k8s-sigs.io", "nodefeatures", {"get", "list", "watch", "create", "update"}),
    (
        "Role",
        "monitoring.coreos.com",
        "servicemonitors",
        {"get", "list", "watch", "create", "patch", "delete"},
    ),
]


@pytest.mark.parametrize(("kind", "group", "resource", "verbs"), GRANTS)
def test_exactly_the_verbs_it_needs(kind: str, group: str, resource: str, verbs: set[str]) -> None:
    assert allowed(kind, group, resource) == verbs


def test_nothing_else_is_granted() -> None:
    assert allowed("ClusterRole", "", "secrets") == set()
    # Pre-flight reads the driver's image pull secrets by name, in its own namespace only.
    assert allowed("Role", "", "secrets") == {"get"}
    assert allowed("ClusterRole", "apps", "daemonsets") & {"create", "update", "delete"} == set()
    assert allowed("ClusterRole", "", "nodes") & {"delete", "create"} == set()
    # Every namespace but its own is out of reach (a ClusterRole would reach them all).
    assert allowed("ClusterRole", "", "namespaces") == set()


def test_every_resource_and_verb_is_in_the_table() -> None:
    """The table above is the whole grant: a rule added to config/rbac without a line
    there (and so without a reason in docs/rbac.md) fails here."""
    listed = {(kind, group, resource) for kind, group, resource, _ in GRANTS}
    granted = {
        (kind, group, resource)
        for kind in ("ClusterRole", "Role")
        for rule in rules(kind)
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert granted - listed == set()


def test_admission_policies_refuse_and_bind_each_other() -> None:
    """Each policy is bound (a policy without a binding does nothing), refuses (Deny, and
    Fail when it cannot be evaluated, so a broken policy closes rather than opens), and
    matches one ServiceAccount of ours by name."""
    found = admission_policies()
    policies = {name for kind, name in found if kind == "ValidatingAdmissionPolicy"}
    assert policies == {"gpu-operator-rbac", "gpu-operator-node-agent-own-node"}
    for name in policies:
        policy = found[("ValidatingAdmissionPolicy", name)]["spec"]
        binding = found[("ValidatingAdmissionPolicyBinding", name)]["spec"]
        assert binding == {"policyName": name, "validationActions": ["Deny"]}
        assert policy["failurePolicy"] == "Fail"
        (condition,) = policy["matchConditions"]
        assert "request.userInfo.username" in condition["expression"]
        assert all(v["reason"] == "Forbidden" for v in policy["validations"])


def test_bindings_point_at_the_service_account() -> None:
    docs = documents()
    account = docs["ServiceAccount"]["metadata"]
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        (subject,) = docs[kind]["subjects"]
        assert (subject["name"], subject["namespace"]) == (account["name"], account["namespace"])
    assert docs["ClusterRoleBinding"]["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]
    assert docs["RoleBinding"]["roleRef"]["name"] == docs["Role"]["metadata"]["name"]
    assert docs["Role"]["metadata"]["namespace"] == account["namespace"]
