"""The ServiceAccount an operand's pods run as and the RBAC that gives it its rights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.operands._context import Ctx


def service_account(ctx: Ctx, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ctx.meta(name)}


def rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def role(ctx: Ctx, name: str, rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A Role and the RoleBinding that gives it to the ServiceAccount of the same name."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": ctx.meta(name),
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": ctx.meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ctx.namespace}],
        },
    ]


def cluster_role(
    ctx: Ctx, name: str, rules: Sequence[Mapping[str, Any]], *, account: str | None = None
) -> list[dict[str, Any]]:
    """A ClusterRole and the ClusterRoleBinding that gives it to a ServiceAccount."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": ctx.meta(name, namespaced=False),
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": ctx.meta(name, namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": account or name, "namespace": ctx.namespace}
            ],
        },
    ]


def account_and_rbac(
    ctx: Ctx,
    account: str,
    *,
    rules: Sequence[Mapping[str, Any]] = (),
    cluster_rules: Sequence[Mapping[str, Any]] = (),
    cluster_role_name: str | None = None,
) -> list[dict[str, Any]]:
    """The ServiceAccount an operand's pods run as, then the Role and ClusterRole (with
    their bindings) that give it `rules` and `cluster_rules`.

    The roles are named after the account, as the reference names them; only the DCGM
    exporter's ClusterRole has a name of its own (`cluster_role_name`).
    """
    objects = [service_account(ctx, account)]
    if rules:
        objects += role(ctx, account, rules)
    if cluster_rules:
        objects += cluster_role(ctx, cluster_role_name or account, cluster_rules, account=account)
    return objects
