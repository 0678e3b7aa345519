"""Every ServiceAccount we ship, on a real API server (RBAC authorization and admission on),
acting as itself (impersonated, see `_accounts`): what it may do succeeds, what it may not
is refused, by RBAC (403) or by an admission policy (config/rbac/admission_policies.yaml),
whose message names the rule. Writes are dry runs, so even a request that should have been
refused and was not changes nothing on the shared control plane.

The accounts: the operator (config/rbac), the chart's hook Jobs (templates/hooks.yaml), and
every account the operator renders for its operands, the node agent among them (its writes
bound to its own node), each installed in a namespace of its own here."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from components.hooks import apply_crds, delete_policies
from components.kinds import CLUSTER_POLICY
from gpusim import apply_crds as serve_crds
from gpusim import load_documents
from reconciler import ApiConnection, Client, Object
from reconciler.envtest import ControlPlane
from reconciler.lowlevel import StaticToken
from tests.integration.components._accounts import (
    ALLOWED,
    STRATEGIC,
    Actor,
    actor,
    client_for,
    install_account,
    install_operator,
    refused_by,
    user_of,
)
from tests.integration.deploy.test_hooks import release_and_delete
from tests.tools import CHART, REPO, run
from tests.unit.components.operands.test_operand_rbac import every_operand_rbac, every_operand_role

pytestmark = pytest.mark.integration

NAMESPACE = "rbac-check"
PREFIX = "rbac-check"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
CLUSTER_ROLES = f"{RBAC_API}/clusterroles"
BINDINGS = f"{RBAC_API}/clusterrolebindings"
OURS = {"app.kubernetes.io/managed-by": "gpu-operator"}
NODE_A = "rbac-check-node-a"
NODE_B = "rbac-check-node-b"
AGENT = "gpu-operator-node-agent"
POLICY_MESSAGE = "ValidatingAdmissionPolicy"


@pytest.fixture
async def admin(api_client: client.ApiClient) -> AsyncIterator[Client]:
    admin = client_for(api_client)
    yield admin
    await admin.cache.stop()


@pytest.fixture
async def operator(admin: Client) -> Actor:
    """The operator's account, with config/rbac and the admission policies in force."""
    return await install_operator(admin, NAMESPACE, prefix=PREFIX)


def cluster_role(name: str, labels: dict[str, str] | None = None, **extra: Any) -> Object:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels or {}, **extra},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }


def binding(
    name: str, role: str, subjects: list[dict[str, str]], *, kind: str = "ClusterRoleBinding"
) -> Object:
    meta: dict[str, Any] = {"name": name, "labels": OURS}
    if kind == "RoleBinding":
        meta["namespace"] = NAMESPACE
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role" if kind == "RoleBinding" else "ClusterRole",
            "name": role,
        },
        "subjects": subjects,
    }


def account(name: str, namespace: str = NAMESPACE) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


async def node(admin: Client, name: str) -> None:
    await admin.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


# -- the identity the tests act as --------------------------------------------------------


async def test_an_impersonated_account_is_what_its_pod_token_makes_it(
    api_client: client.ApiClient,
) -> None:
    """The user, groups and node claim the server sees when we act as the node agent: those
    of a projected token in a pod on NODE_A."""
    me = await actor(api_client, NAMESPACE, AGENT, node=NODE_A).whoami()
    assert me["username"] == user_of(NAMESPACE, AGENT)
    assert sorted(me["groups"]) == sorted(
        ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"]
    )
    assert me["extra"] == {"authentication.kubernetes.io/node-name": [NODE_A]}


# -- the operator ------------------------------------------------------------------------

ROLE_OF_OURS = "nvidia-rbac-check"
UNRELATED = "rbac-check-unrelated"
REFERENCE_LEFT = "nvidia-rbac-check-reference"


@pytest.fixture
async def rbac_objects(admin: Client, operator: Actor) -> Actor:
    """Objects the operator meets: one of ours, one of somebody else's, one the reference
    operator left (owned by a ClusterPolicy, unlabelled)."""
    owner = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "name": "cluster-policy",
        "uid": "00000000-0000-0000-0000-0000000000aa",
    }
    for obj in (
        cluster_role(ROLE_OF_OURS, OURS),
        cluster_role(UNRELATED),
        cluster_role(REFERENCE_LEFT, ownerReferences=[owner]),
    ):
        await admin.apply(obj)
    await admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": ROLE_OF_OURS, "namespace": NAMESPACE, "labels": OURS},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        }
    )
    return operator


OPERATOR_CASES: list[tuple[str, str, str, Any, tuple[str, ...]]] = [
    # Somebody else's RBAC: neither deleted, stripped, nor taken over by a label.
    ("delete cluster-admin", "DELETE", f"{CLUSTER_ROLES}/cluster-admin", None, ("is neither",)),
    (
        "strip cluster-admin",
        "PATCH",
        f"{CLUSTER_ROLES}/cluster-admin",
        {"rules": []},
        ("is neither",),
    ),
    (
        "label an unrelated ClusterRole as ours",
        "PATCH",
        f"{CLUSTER_ROLES}/{UNRELATED}",
        {"metadata": {"labels": OURS}},
        ("is neither",),
    ),
    (
        "delete an unrelated ClusterRole",
        "DELETE",
        f"{CLUSTER_ROLES}/{UNRELATED}",
        None,
        ("neither",),
    ),
    (
        "delete the cluster-admin binding",
        "DELETE",
        f"{BINDINGS}/cluster-admin",
        None,
        ("is neither",),
    ),
    # Bindings: only the role of the binding's name, only to accounts of its namespace.
    # cluster-admin: RBAC refuses it first (it holds less than cluster-admin grants).
    (
        "bind cluster-admin to itself",
        "POST",
        BINDINGS,
        binding("nvidia-rbac-check-admin", "cluster-admin", [account("gpu-operator")]),
        ("attempting to grant RBAC permissions not currently held",),
    ),
    (
        "bind a role of another name",
        "POST",
        BINDINGS,
        binding("nvidia-rbac-check-other", ROLE_OF_OURS, [account("gpu-operator")]),
        ("binds ClusterRole nvidia-rbac-check",),
    ),
    (
        "bind its role to every authenticated user",
        "POST",
        BINDINGS,
        binding(
            ROLE_OF_OURS,
            ROLE_OF_OURS,
            [
                {
                    "kind": "Group",
                    "name": "system:authenticated",
                    "apiGroup": "rbac.authorization.k8s.io",
                }
            ],
        ),
        ("only to ServiceAccounts of its own namespace",),
    ),
    (
        "bind its role to an account of another namespace",
        "POST",
        BINDINGS,
        binding(ROLE_OF_OURS, ROLE_OF_OURS, [account("default", "default")]),
        ("only to ServiceAccounts of its own namespace",),
    ),
    (
        "bind its Role in its namespace to every authenticated user",
        "POST",
        f"{RBAC_API}/namespaces/{NAMESPACE}/rolebindings",
        binding(
            ROLE_OF_OURS,
            ROLE_OF_OURS,
            [
                {
                    "kind": "Group",
                    "name": "system:authenticated",
                    "apiGroup": "rbac.authorization.k8s.io",
                }
            ],
            kind="RoleBinding",
        ),
        ("only to ServiceAccounts of its own namespace",),
    ),
    # What it creates is labelled ours and named as an operand's RBAC is.
    (
        "create an unlabelled ClusterRole",
        "POST",
        CLUSTER_ROLES,
        cluster_role("nvidia-rbac-check-new"),
        ("is not",),
    ),
    (
        "create a ClusterRole under a name no operand has",
        "POST",
        CLUSTER_ROLES,
        cluster_role("rbac-check-new", OURS),
        ("named nvidia-*",),
    ),
    # Its namespace is the one Namespace it may label (spec.psa.enabled).
    (
        "label kube-system",
        "PATCH",
        "/api/v1/namespaces/kube-system",
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        ('cannot patch resource "namespaces"',),
    ),
    ("read kube-system", "GET", "/api/v1/namespaces/kube-system", None, ("cannot get",)),
    # What it does.
    (
        "create an operand's ClusterRole",
        "POST",
        CLUSTER_ROLES,
        cluster_role("nvidia-rbac-check-new", OURS),
        (),
    ),
    (
        "bind an operand's ClusterRole to the operand's account",
        "POST",
        BINDINGS,
        binding(ROLE_OF_OURS, ROLE_OF_OURS, [account("nvidia-rbac-check")]),
        (),
    ),
    (
        "bind an operand's Role to the operand's account",
        "POST",
        f"{RBAC_API}/namespaces/{NAMESPACE}/rolebindings",
        binding(ROLE_OF_OURS, ROLE_OF_OURS, [account("nvidia-rbac-check")], kind="RoleBinding"),
        (),
    ),
    (
        "change an operand's ClusterRole",
        "PATCH",
        f"{CLUSTER_ROLES}/{ROLE_OF_OURS}",
        {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
        (),
    ),
    ("prune an operand's ClusterRole", "DELETE", f"{CLUSTER_ROLES}/{ROLE_OF_OURS}", None, ()),
    (
        "adopt a ClusterRole the reference operator left",
        "PATCH",
        f"{CLUSTER_ROLES}/{REFERENCE_LEFT}",
        {"metadata": {"labels": OURS}},
        (),
    ),
    (
        "delete a ClusterRole the reference operator left",
        "DELETE",
        f"{CLUSTER_ROLES}/{REFERENCE_LEFT}",
        None,
        (),
    ),
    (
        "label its own namespace",
        "PATCH",
        f"/api/v1/namespaces/{NAMESPACE}",
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
        (),
    ),
    ("read its own namespace", "GET", f"/api/v1/namespaces/{NAMESPACE}", None, ()),
]


@pytest.mark.parametrize(
    ("what", "method", "path", "body", "refusal"),
    OPERATOR_CASES,
    ids=[case[0] for case in OPERATOR_CASES],
)
async def test_the_operator(
    rbac_objects: Actor,
    what: str,
    method: str,
    path: str,
    body: Any,
    refusal: tuple[str, ...],
) -> None:
    answer = await rbac_objects.attempt(method, path, body)
    if refusal:
        assert refused_by(answer, *refusal), f"{what}: {answer}"
    else:
        assert answer == ALLOWED, what


async def can(
    api: client.ApiClient,
    user: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str | None = None,
    subresource: str | None = None,
    name: str | None = None,
) -> bool:
    """RBAC's answer for `user` (a ServiceAccount, with its groups): a SubjectAccessReview."""
    account_namespace = user.split(":")[2]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": [
                "system:serviceaccounts",
                f"system:serviceaccounts:{account_namespace}",
                "system:authenticated",
            ],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                **({"namespace": namespace} if namespace else {}),
                **({"subresource": subresource} if subresource else {}),
                **({"name": name} if name else {}),
            },
        },
    }
    result = await client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(result.status.allowed)


OPERATOR = user_of(NAMESPACE, "gpu-operator")

ALLOWED_TO_OPERATOR = [
    ("patch", "nodes", "", None, None),
    # Held only to be granted: a role can grant only what its creator holds.
    ("update", "nodes", "", None, None),
    ("patch", "nodes", "", None, "status"),
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
    # Pre-flight reads the driver's image pull secrets by name, in its namespace only.
    ("get", "secrets", "", NAMESPACE, None),
    # Secure /metrics: who is this scraper, and may they get /metrics?
    ("create", "tokenreviews", "authentication.k8s.io", None, None),
    ("create", "subjectaccessreviews", "authorization.k8s.io", None, None),
]

DENIED_TO_OPERATOR = [
    ("list", "secrets", "", NAMESPACE, None),
    ("watch", "secrets", "", NAMESPACE, None),
    ("get", "secrets", "", "kube-system", None),
    ("delete", "nodes", "", None, None),
    ("create", "pods", "", "kube-system", None),
    ("create", "daemonsets", "apps", "kube-system", None),
    ("delete", "controllerrevisions", "apps", NAMESPACE, None),
    ("create", "configmaps", "", "kube-system", None),
    ("delete", "clusterpolicies", "nvidia.com", None, None),
    ("create", "customresourcedefinitions", "apiextensions.k8s.io", None, None),
    ("escalate", "clusterroles", "rbac.authorization.k8s.io", None, None),
    ("bind", "clusterroles", "rbac.authorization.k8s.io", None, None),
    # Writes are applies and patches: no PUT of a whole object it does not need to grant.
    # (DaemonSets and Deployments of its namespace it must hold `update` on: the GPUCluster's
    # DRA driver Roles grant it there, and a role can grant only what its writer holds.)
    ("update", "clusterroles", "rbac.authorization.k8s.io", None, None),
    ("update", "daemonsets", "apps", "kube-system", None),
    ("update", "clusterpolicies", "nvidia.com", None, None),
    # Namespaces: its own only (a Role), never all of them.
    ("patch", "namespaces", "", "kube-system", None),
    # DaemonSets elsewhere: get only, to grant the driver manager's drain; no list or watch.
    ("list", "daemonsets", "apps", "kube-system", None),
    ("watch", "daemonsets", "apps", "kube-system", None),
]


@pytest.mark.parametrize(("verb", "resource", "group", "namespace", "sub"), ALLOWED_TO_OPERATOR)
async def test_the_operator_may(
    api_client: client.ApiClient,
    operator: Actor,
    verb: str,
    resource: str,
    group: str,
    namespace: str | None,
    sub: str | None,
) -> None:
    assert await can(
        api_client, OPERATOR, verb, resource, group=group, namespace=namespace, subresource=sub
    )


@pytest.mark.parametrize(("verb", "resource", "group", "namespace", "sub"), DENIED_TO_OPERATOR)
async def test_the_operator_may_not(
    api_client: client.ApiClient,
    operator: Actor,
    verb: str,
    resource: str,
    group: str,
    namespace: str | None,
    sub: str | None,
) -> None:
    assert not await can(
        api_client, OPERATOR, verb, resource, group=group, namespace=namespace, subresource=sub
    )


async def test_the_operator_may_create_every_rbac_object_its_operands_need(
    admin: Client, operator: Actor
) -> None:
    """The API server's escalation check and the admission policy, as the operator's
    account meets them: every ServiceAccount, role and binding an operand renders is
    created (dry run) as the operator would. A rule the operator does not hold, a name the
    policy does not take, a binding it refuses: a policy stuck on a 403 in a real cluster.
    The roles are first stored for real (by the admin): a binding is checked against the
    rules of the role it names, which a dry run would not leave behind."""
    objects = every_operand_rbac(NAMESPACE)
    for obj in objects:
        if obj["kind"] in ("Role", "ClusterRole"):
            await admin.apply(obj)
    created = 0
    for obj in objects:
        kind = obj["kind"]
        if kind == "ServiceAccount":
            path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
        elif kind in ("Role", "RoleBinding"):
            path = f"{RBAC_API}/namespaces/{NAMESPACE}/{kind.lower()}s"
        else:
            path = f"{RBAC_API}/{kind.lower()}s"
        answer = await operator.attempt("POST", path, obj)
        assert answer == ALLOWED, f"{kind} {obj['metadata']['name']}: {answer}"
        created += 1
    assert created >= 60
    assert len(every_operand_role(NAMESPACE)) >= 15


# -- the node agent ----------------------------------------------------------------------


def rendered_roles(account_name: str) -> list[Object]:
    """The roles the operand renders for `account_name` (bound to it by name)."""
    objects = every_operand_rbac(NAMESPACE)
    bound = {
        (o["roleRef"]["kind"], o["roleRef"]["name"])
        for o in objects
        if o["kind"].endswith("Binding") and any(s["name"] == account_name for s in o["subjects"])
    }
    return [o for o in objects if (o["kind"], o["metadata"]["name"]) in bound]


@pytest.fixture
async def node_agent(admin: Client, operator: Actor) -> None:
    """The node agent's account with the RBAC the operator renders for it, two nodes, and
    the admission policies in force (`operator` installs them)."""
    await install_account(admin, NAMESPACE, AGENT, rendered_roles(AGENT), prefix=PREFIX)
    for name in (NODE_A, NODE_B):
        await node(admin, name)


def condition() -> Object:
    return {
        "status": {
            "conditions": [
                {"type": "GPUHealthy", "status": "True", "reason": "Healthy", "message": "ok"}
            ]
        }
    }


ANNOTATION = {"metadata": {"annotations": {"nvidia.com/gpu-processes": "[]"}}}
TAINT = {"spec": {"taints": [{"key": "rbac-check", "effect": "NoSchedule"}]}}
NODES = "/api/v1/nodes"

#: (what, method, path, body, field selector of a list, the agent's node, the refusal)
AGENT_CASES: list[tuple[str, str, str, Any, str, str, tuple[str, ...]]] = [
    ("annotate its node", "PATCH", f"{NODES}/{NODE_A}", ANNOTATION, "", NODE_A, ()),
    ("write its node's conditions", "PATCH", f"{NODES}/{NODE_A}/status", condition(), "",
     NODE_A, ()),
    ("list the pods on its node", "GET", "/api/v1/pods", None, f"spec.nodeName={NODE_A}",
     NODE_A, ()),
    ("list its node", "GET", NODES, None, f"metadata.name={NODE_A}", NODE_A, ()),
    ("annotate another node", "PATCH", f"{NODES}/{NODE_B}", ANNOTATION, "", NODE_A,
     (POLICY_MESSAGE, f"on node {NODE_A} may write only that node, not {NODE_B}")),
    ("taint another node", "PATCH", f"{NODES}/{NODE_B}", TAINT, "", NODE_A,
     (POLICY_MESSAGE, f"not {NODE_B}")),
    ("write another node's conditions", "PATCH", f"{NODES}/{NODE_B}/status", condition(), "",
     NODE_A, (POLICY_MESSAGE, f"not {NODE_B}")),
    ("write a node from a token bound to no node", "PATCH", f"{NODES}/{NODE_A}", ANNOTATION, "",
     "", (POLICY_MESSAGE, "token names no node")),
    ("delete its node", "DELETE", f"{NODES}/{NODE_A}", None, "", NODE_A,
     ('cannot delete resource "nodes"',)),
    ("read secrets", "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets", None, "", NODE_A,
     ('cannot list resource "secrets"',)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("what", "method", "path", "body", "selector", "on", "refusal"),
    AGENT_CASES,
    ids=[case[0] for case in AGENT_CASES],
)
async def test_the_node_agent(
    api_client: client.ApiClient,
    node_agent: None,
    what: str,
    method: str,
    path: str,
    body: Any,
    selector: str,
    on: str,
    refusal: tuple[str, ...],
) -> None:
    agent = actor(api_client, NAMESPACE, AGENT, node=on or None)
    params = {"fieldSelector": selector} if selector else None
    answer = await agent.attempt(method, path, body, content_type=STRATEGIC, params=params)
    if refusal:
        assert refused_by(answer, *refusal), f"{what}: {answer}"
    else:
        assert answer == ALLOWED, what


async def test_the_node_agent_with_its_pod_token_writes_only_its_node(
    control_plane: ControlPlane, admin: Client, node_agent: None
) -> None:
    """Without impersonation: a token the API server issues for a pod on NODE_A (as the
    kubelet asks for it) carries that node (ServiceAccountTokenPodNodeInfo, on in every
    kube-apiserver since 1.30), and the policy reads it."""
    pod = await admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "rbac-check-node-agent", "namespace": NAMESPACE},
            "spec": {
                "nodeName": NODE_A,
                "serviceAccountName": AGENT,
                "containers": [{"name": "agent", "image": "gpu-operator"}],
            },
        }
    )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.object["metadata"]["name"],
                "uid": pod.object["metadata"]["uid"],
            },
        },
    }
    answer = await admin.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{AGENT}/token", body=request
    )
    trust = ssl.create_default_context(cafile=str(control_plane.pki.ca_cert))
    connection = ApiConnection(
        control_plane.api_url,
        ssl_context=trust,
        credentials=StaticToken(answer["status"]["token"]),
    )
    async with connection:
        agent = Actor(client_for(connection))
        me = await agent.whoami()
        assert me["extra"]["authentication.kubernetes.io/node-name"] == [NODE_A]
        patch = {"metadata": {"annotations": {"nvidia.com/gpu-processes": "[]"}}}
        assert await agent.attempt("PATCH", f"/api/v1/nodes/{NODE_A}", patch) == ALLOWED
        refused = await agent.attempt("PATCH", f"/api/v1/nodes/{NODE_B}", patch)
        assert refused_by(refused, POLICY_MESSAGE, f"not {NODE_B}"), refused


# -- the other accounts: the hooks and every operand ------------------------------------


def hooks_role() -> Object:
    out = run("helm", "template", "gpu", CHART, "--namespace", NAMESPACE).stdout
    (role,) = [
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpu-operator-hooks"
    ]
    return {
        "kind": "ClusterRole",
        "metadata": {"name": "gpu-operator-hooks"},
        "rules": role["rules"],
    }


async def test_the_hooks_apply_our_crds_and_delete_policies_only(
    control_plane: ControlPlane, admin: Client, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """The hook Jobs' commands, run with a token of their account (as in their pods), do
    their work; the account may do nothing else."""
    account = "gpu-operator-hooks"
    await install_account(admin, NAMESPACE, account, [hooks_role()], prefix=PREFIX)
    token = await admin.request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )
    kubeconfig = tmp_path / "hooks.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "envtest",
                        "cluster": {
                            "server": control_plane.api_url,
                            "certificate-authority": str(control_plane.pki.ca_cert),
                        },
                    }
                ],
                "users": [{"name": account, "user": {"token": token["status"]["token"]}}],
                "contexts": [{"name": "hooks", "context": {"cluster": "envtest", "user": account}}],
                "current-context": "hooks",
            }
        )
    )
    # The CRDs served already (as on an upgrade), then the hook's apply over them.
    await serve_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    await apply_crds(str(kubeconfig))
    await admin.apply(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {
                "name": "rbac-check-hooks",
                "annotations": {
                    "meta.helm.sh/release-name": "rbac-check",
                    "meta.helm.sh/release-namespace": NAMESPACE,
                },
            },
            "spec": {},
        }
    )
    # Deleted in the foreground: with no garbage collector on this control plane its
    # foregroundDeletion finalizer stays, so the hook still finds it when its time is up.
    try:
        assert await delete_policies(str(kubeconfig), "rbac-check", NAMESPACE, 3.0) == [
            "ClusterPolicy rbac-check-hooks"
        ]
        deleting = await admin.get_live(CLUSTER_POLICY, "rbac-check-hooks")
        assert deleting["metadata"].get("deletionTimestamp")
    finally:
        await release_and_delete(admin, ["rbac-check-hooks"])

    hooks = actor(api_client, NAMESPACE, account)
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    other_crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.rbac-check.example"},
        "spec": {
            "group": "rbac-check.example",
            "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    for method, path, body in (
        ("POST", crds, other_crd),
        ("PATCH", f"{crds}/nodefeatures.nfd.k8s-sigs.io", {}),
        ("DELETE", f"{crds}/clusterpolicies.nvidia.com", None),
        ("PATCH", "/apis/nvidia.com/v1/clusterpolicies/cluster-policy", {}),
        ("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets", None),
        ("DELETE", f"/api/v1/nodes/{NODE_A}", None),
    ):
        answer = await hooks.attempt(method, path, body)
        assert refused_by(answer, "cannot"), (method, path, answer)
    user = user_of(NAMESPACE, account)
    crd = "customresourcedefinitions"
    assert not await can(api_client, user, "watch", "clusterpolicies", group="nvidia.com")
    assert not await can(api_client, user, "create", crd, group="apiextensions.k8s.io")
    # A server-side apply that creates a CRD asks `create` with the CRD's name: ours only.
    for name, may in (("nvidiadrivers.nvidia.com", True), ("widgets.rbac-check.example", False)):
        group = "apiextensions.k8s.io"
        assert await can(api_client, user, "create", crd, group=group, name=name) is may


def operand_accounts() -> list[str]:
    return sorted(
        o["metadata"]["name"]
        for o in every_operand_rbac(NAMESPACE)
        if o["kind"] == "ServiceAccount"
    )


#: Asked of every operand account: none may.
NEVER = [
    ("get", "secrets", "", NAMESPACE, None),
    ("create", "clusterrolebindings", "rbac.authorization.k8s.io", None, None),
    ("delete", "nodes", "", None, None),
    ("create", "pods", "", "kube-system", None),
    ("create", "daemonsets", "apps", NAMESPACE, None),
    ("patch", "clusterpolicies", "nvidia.com", None, None),
]


@pytest.mark.parametrize("name", operand_accounts())
async def test_each_operand_account_holds_its_rules_and_nothing_else(
    admin: Client, api_client: client.ApiClient, name: str
) -> None:
    """As rendered, bound as the operator binds it: each rule of its roles is granted
    (where the role reaches: a Role its namespace only), and nothing of NEVER is."""
    roles = rendered_roles(name)
    await install_account(admin, NAMESPACE, name, roles, prefix=PREFIX)
    user = user_of(NAMESPACE, name)
    granted: set[tuple[str, str, str, str | None]] = set()
    for role in roles:
        where = NAMESPACE if role["kind"] == "Role" else None
        for rule in role["rules"]:
            for resource in rule["resources"]:
                main, _, sub = resource.partition("/")
                for verb in rule["verbs"]:
                    granted.add((verb, resource, rule["apiGroups"][0], where))
                    assert await can(
                        api_client,
                        user,
                        verb,
                        main,
                        group=rule["apiGroups"][0],
                        namespace=where or "some-team",
                        subresource=sub or None,
                    ), (name, verb, resource)
                    if where:  # a Role reaches its own namespace only
                        assert not await can(
                            api_client,
                            user,
                            verb,
                            main,
                            group=rule["apiGroups"][0],
                            namespace="some-team",
                            subresource=sub or None,
                        ), (name, verb, resource, "some-team")
    for verb, resource, group, namespace, sub in NEVER:
        assert not await can(
            api_client, user, verb, resource, group=group, namespace=namespace, subresource=sub
        ), (name, verb, resource)
