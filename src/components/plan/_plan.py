"""One policy's plan: its objects, then its nodes, from one read of the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.controllers import FIELD_MANAGER, HASH_ANNOTATION
from components.controllers.clusterpolicy import PolicyPreview
from components.plan._fields import changed_fields
from components.plan._nodes import NodePlan, node_plan
from components.plan._objects import ObjectChange, object_changes
from components.preflight import ImageChecker
from reconciler import GVK, Manager, Object, metadata_of, name_of, namespace_of
from reconciler.errors import Conflict, Forbidden

CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
DAEMONSET = GVK("apps", "v1", "DaemonSet")


@dataclass(frozen=True)
class PolicyPlan:
    policy: str
    objects: tuple[ObjectChange, ...]
    nodes: NodePlan

    @property
    def changes(self) -> bool:
        return bool(self.objects) or self.nodes.touches

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "changes": self.changes,
            "objects": [c.to_dict() for c in self.objects],
            "nodes": self.nodes.to_dict(),
        }


async def plan_policy(
    api_client: Any,
    document: Object,
    *,
    namespace: str,
    checker: ImageChecker | None = None,
) -> PolicyPlan:
    """What applying `document` (a ClusterPolicy) would do to the cluster `api_client`
    reaches. Reads only (the server-side applies are dry runs). Raises
    `pydantic.ValidationError` for a spec the operator cannot read."""
    manager = Manager(
        api_client, field_manager=FIELD_MANAGER, bind_address=None, hash_annotation=HASH_ANNOTATION
    )
    previewer = PolicyPreview(manager, namespace)
    await previewer.start()
    try:
        client = previewer.controller.client
        live = client.get(CLUSTER_POLICY, name_of(document))
        obj = await _as_applied(client, document, live)
        preview = await previewer.render(obj)
        objects = await object_changes(previewer, preview)
        driver = previewer.driver_operand(preview)
        daemonsets = [
            (client.get(DAEMONSET, c.name, c.namespace), c)
            for c in objects
            if c.kind == DAEMONSET.kind and c.component == driver and c.action != "deleted"
        ]
        nodes = await node_plan(client, namespace, preview.policy, daemonsets, checker=checker)
        own = _policy_change(obj, live)
        return PolicyPlan(name_of(document), (*own, *objects), nodes)
    finally:
        await previewer.stop()


CONFLICT_ATTEMPTS = 3
"""Dry-run updates tried on a fresh copy of the policy when its resourceVersion moved on."""


async def _as_applied(client: Any, document: Object, live: Object | None) -> Object:
    """The policy as the operator would read it once applied: as the API server would store
    it (its defaults filled in), from a dry run of the write; the file's spec on the live
    object (whose uid owns what is rendered), or the file created. Where that write is not
    ours to make (the operator's RBAC only reads policies), the file's spec on the live
    object as it is: the models fill in the same defaults the CRD does."""
    res = await client.resource(CLUSTER_POLICY)
    params = {"dryRun": "All"}
    try:
        if live is None:
            created: Object = await client.request(
                "POST", res.path("", None), params=params, body=document
            )
            return {**created, "metadata": {**metadata_of(created), "uid": None}}
        path = res.path("", name_of(live))
        for _ in range(CONFLICT_ATTEMPTS - 1):
            try:
                return await _dry_run_update(client, path, live, document)
            except Conflict:
                # The operator writes the policy's status at any time: take the server's
                # copy and put the file's spec on it again.
                live = await client.request("GET", path)
        return await _dry_run_update(client, path, live, document)
    except Forbidden:
        if live is None:
            return document
        return {**live, "spec": document.get("spec") or {}}


async def _dry_run_update(client: Any, path: str, live: Object, document: Object) -> Object:
    body = {**live, "spec": document.get("spec") or {}}
    updated: Object = await client.request("PUT", path, params={"dryRun": "All"}, body=body)
    return updated


def _policy_change(applied: Object, live: Object | None) -> tuple[ObjectChange, ...]:
    what = (CLUSTER_POLICY.kind, name_of(applied), namespace_of(applied), "")
    if live is None:
        return (ObjectChange("created", *what),)
    fields = changed_fields(live.get("spec") or {}, applied.get("spec") or {}, "spec")
    return (ObjectChange("changed", *what, fields=tuple(fields)),) if fields else ()
