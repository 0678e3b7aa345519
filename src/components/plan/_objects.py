"""The objects a policy would create, change (which fields) or delete: the controller's
render (`PolicyPreview`), each object compared as its apply would find it.

An object whose stored hash is the desired one is unchanged: the apply skips it. Any other
is sent to the API server as the operator's server-side apply with `dryRun=All`, and what
the server would store is compared with what it stores (server-set fields left out), so
defaults, field ownership and admission are the server's, not a guess of ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.controllers import FIELD_MANAGER, HASH_ANNOTATION
from components.controllers.clusterpolicy import PolicyPreview, Preview
from components.plan._fields import changed_fields, comparable
from reconciler import GVK, Object, annotations_of, metadata_of, name_of, namespace_of
from reconciler.lowlevel import desired_hash

APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True)
class ObjectChange:
    action: str  # created | changed | deleted
    kind: str
    name: str
    namespace: str
    component: str
    fields: tuple[str, ...] = ()
    after: Object | None = None
    """What the server would store (created, changed)."""

    @property
    def what(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "action": self.action,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "component": self.component,
        }
        if self.action == "changed":
            out["fields"] = list(self.fields)
        return out


async def object_changes(previewer: PolicyPreview, preview: Preview) -> list[ObjectChange]:
    """Every object the apply and prune of `preview` would write, in the apply's order."""
    client = previewer.controller.client
    await previewer.cache_kinds_of([o for _, o in preview.objects])
    out: list[ObjectChange] = []
    for component, obj in preview.objects:
        gvk = GVK.of(obj)
        live = client.get(gvk, name_of(obj), namespace_of(obj))
        digest = desired_hash(obj)
        if live is not None and annotations_of(live).get(HASH_ANNOTATION) == digest:
            continue
        meta = {**metadata_of(obj), "annotations": {**annotations_of(obj), HASH_ANNOTATION: digest}}
        if not preview.plan.policy_uid:  # a policy not created yet: no uid to own by
            meta = {k: v for k, v in meta.items() if k != "ownerReferences"}
        sent = {**obj, "metadata": meta}
        after = await _dry_run_apply(client, gvk, sent)
        ref = (obj.get("kind", ""), name_of(obj), namespace_of(obj), component)
        if live is None:
            out.append(ObjectChange("created", *ref, after=after))
            continue
        fields = changed_fields(comparable(live), comparable(after))
        if fields:
            out.append(ObjectChange("changed", *ref, fields=tuple(fields), after=after))
    for component, obj in previewer.unwanted(preview):
        kind = str(obj.get("kind"))
        out.append(ObjectChange("deleted", kind, name_of(obj), namespace_of(obj), component))
    return out


async def _dry_run_apply(client: Any, gvk: GVK, obj: Object) -> Object:
    res = await client.resource(gvk)
    path = res.path(namespace_of(obj), name_of(obj))
    params = {"fieldManager": FIELD_MANAGER, "force": True, "dryRun": "All"}
    answer: Object = await client.request(
        "PATCH", path, params=params, body=obj, content_type=APPLY_PATCH
    )
    return answer


def changed_daemonsets(changes: Sequence[ObjectChange]) -> dict[tuple[str, str], ObjectChange]:
    return {(c.namespace, c.name): c for c in changes if c.kind == "DaemonSet"}
