"""Acting as one of our ServiceAccounts on the test API server, and installing what grants
it its rights (config/rbac, the chart's hooks, the operands' RBAC, the admission policies).

An account is acted as by impersonation: the admin's client sends `Impersonate-User:
system:serviceaccount:<namespace>:<name>` and, for a node-bound account, the claim a pod's
projected token carries, `Impersonate-Extra-authentication.kubernetes.io%2fnode-name`. No
`Impersonate-Group` is sent: for a ServiceAccount user without one the API server adds
exactly the groups its token would get (system:serviceaccounts and
system:serviceaccounts:<namespace>, then system:authenticated), which a header cannot
carry more than once through our transport. `whoami` shows the identity the server sees.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from reconciler import Cache, Client, Object
from reconciler.errors import AlreadyExists, Conflict, Forbidden, NotFound
from reconciler.lowlevel import Connection, RESTMapper, Transport, as_connection
from tests.polling import eventually
from tests.tools import REPO

RBAC = REPO / "config" / "rbac"
POLICIES = RBAC / "admission_policies.yaml"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
ALLOWED = "allowed"
JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def user_of(namespace: str, account: str) -> str:
    return f"system:serviceaccount:{namespace}:{account}"


class Impersonating:
    """A `Connection`: the admin's, acting as `user` (on `node`, when given)."""

    def __init__(self, base: Any, user: str, *, node: str | None = None) -> None:
        self.base: Connection = as_connection(base)
        self.host = self.base.host
        self.tls_server_name = self.base.tls_server_name
        self.proxy = self.base.proxy
        self.headers = {"Impersonate-User": user}
        if node is not None:
            key = NODE_NAME_EXTRA.replace("/", "%2f")
            self.headers[f"Impersonate-Extra-{key}"] = node

    async def auth_headers(self) -> dict[str, str]:
        return {**await self.base.auth_headers(), **self.headers}

    def auth_rejected(self, sent: Mapping[str, str]) -> None:
        self.base.auth_rejected(sent)

    def pool(self) -> aiohttp.ClientSession:
        return self.base.pool()


def client_for(api: Any, field_manager: str = "rbac-check") -> Client:
    transport = Transport(api)
    mapper = RESTMapper(transport)
    return Client(transport, mapper, Cache(transport, mapper), field_manager=field_manager)


@dataclass
class Actor:
    """Requests as one account. Writes are dry runs: authorized and admitted (so the
    admission policies judge them) but never stored, whatever the answer."""

    client: Client

    async def attempt(
        self,
        method: str,
        path: str,
        body: Object | None = None,
        *,
        content_type: str | None = None,
        params: Mapping[str, str] | None = None,
    ) -> str:
        """`ALLOWED`, or the message of the API server's 403. A 404 or 409 means the request
        was authorized and admitted and then met the store (nothing to patch, a name taken):
        allowed. A PATCH is a JSON merge patch unless `content_type` says otherwise."""
        if method != "PATCH":
            content_type = JSON
        elif content_type is None:
            content_type = MERGE
        query = dict(params or {})
        if method != "GET":
            query["dryRun"] = "All"
        try:
            await self.client.request(
                method,
                path,
                params=query,
                body=json.dumps(body).encode() if body is not None else None,
                content_type=content_type,
                retry_on=(),
            )
        except Forbidden as exc:
            return exc.message
        except (NotFound, AlreadyExists, Conflict):
            return ALLOWED
        return ALLOWED

    async def whoami(self) -> dict[str, Any]:
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = await self.client.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review
        )
        info: dict[str, Any] = answer["status"]["userInfo"]
        return info


def actor(api: Any, namespace: str, account: str, *, node: str | None = None) -> Actor:
    return Actor(client_for(Impersonating(api, user_of(namespace, account), node=node)))


def documents(path: Path) -> list[Object]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


async def apply_all(admin: Client, objects: list[Object]) -> None:
    for obj in objects:
        await admin.apply(obj)


def bound_to(
    namespace: str, account: str, role: Object, *, cluster_name: str | None = None
) -> list[Object]:
    """`role` (a ClusterRole, renamed `cluster_name`, or a Role in `namespace`) and its
    binding to the account."""
    cluster = role["kind"] == "ClusterRole"
    name = cluster_name if cluster and cluster_name else role["metadata"]["name"]
    meta: dict[str, Any] = {"name": name}
    if not cluster:
        meta["namespace"] = namespace
    kind = role["kind"]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
         "rules": role["rules"]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding",
         "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    ]  # fmt: skip


async def install_account(
    admin: Client, namespace: str, account: str, roles: list[Object], *, prefix: str
) -> None:
    """The namespace, the ServiceAccount and `roles` bound to it; ClusterRoles under
    `prefix`-ed names so that they cannot collide with what other tests install."""
    await admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace},
        }
    )
    for role in roles:
        cluster_name = f"{prefix}-{role['metadata']['name']}"
        await apply_all(admin, bound_to(namespace, account, role, cluster_name=cluster_name))


async def install_operator(admin: Client, namespace: str, *, prefix: str) -> Actor:
    """config/rbac's roles for the operator's ServiceAccount (`gpu-operator`) in
    `namespace`, and the admission policies, in force before this returns; the operator."""
    roles = [
        d
        for name in ("cluster_role.yaml", "role.yaml")
        for d in documents(RBAC / name)
        if d["metadata"]["name"] == "gpu-operator"
    ]
    await install_account(admin, namespace, "gpu-operator", roles, prefix=prefix)
    operator = actor(admin.transport.connection, namespace, "gpu-operator")
    await install_policies(admin, operator)
    return operator


async def install_policies(admin: Client, operator: Actor) -> None:
    """The admission policies, once the API server enforces them (a policy is loaded a
    moment after it is stored), as `operator` (an operator account RBAC lets write
    ClusterRoles) finds. Without the file, nothing: the tests then show what happens
    without the policies."""
    if not POLICIES.exists():
        return
    await apply_all(admin, documents(POLICIES))
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "nvidia-rbac-probe"},
    }

    async def enforced() -> bool:
        answer = await operator.attempt(
            "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body
        )
        return "ValidatingAdmissionPolicy" in answer

    await eventually(enforced, "the admission policies to be enforced")


def refused_by(answer: str, *parts: str) -> bool:
    return answer != ALLOWED and all(p in answer for p in parts)
