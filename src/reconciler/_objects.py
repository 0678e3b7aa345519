"""Kinds, keys and small accessors for objects kept as plain dicts.

Objects stay the JSON the server sent (after trimming): no generated models, because at
5,000 nodes their memory and (de)serialisation cost is the difference between fitting in
the pod's limit or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

Object = dict[str, Any]
"""A Kubernetes object as decoded JSON."""


class GVK(NamedTuple):
    """Group, version and kind; the core group is the empty string."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GVK:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GVK:
        """The kind of an object, from its own apiVersion and kind."""
        return cls.from_api_version(str(obj["apiVersion"]), str(obj["kind"]))

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


class Request(NamedTuple):
    """What a reconcile is asked to look at: one object by namespace and name.

    A tuple, so it hashes fast and compares by value in the work queue; `namespace` is ""
    for cluster-scoped objects.
    """

    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Request:
        meta = obj.get("metadata") or {}
        return cls(str(meta.get("namespace") or ""), str(meta["name"]))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


ObjectKey = Request
"""Cache keys are the same (namespace, name) pairs that requests use."""


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("namespace") or "")


def ref_of(namespace: str, name: str) -> str:
    """How a log line names an object: `namespace/name`, or `name` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


def ref(obj: Mapping[str, Any]) -> str:
    return ref_of(namespace_of(obj), name_of(obj))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = meta(obj).get("labels")
    return labels if isinstance(labels, dict) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    annotations = meta(obj).get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def owner_references_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    refs = meta(obj).get("ownerReferences")
    return refs if isinstance(refs, list) else []


def resource_version_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def revision_of(obj: Mapping[str, Any]) -> int | None:
    """The resourceVersion as a number, to tell which of two copies is newer (the API
    server hands out etcd revisions, comparable since Kubernetes 1.35, KEP-5504); None
    when it is not one."""
    return parse_revision(resource_version_of(obj))


def parse_revision(resource_version: str) -> int | None:
    return int(resource_version) if resource_version.isdigit() else None


def generation_of(obj: Mapping[str, Any]) -> int:
    return int(meta(obj).get("generation") or 0)


def uid_of(obj: Mapping[str, Any]) -> str:
    return str(meta(obj).get("uid") or "")


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """Whether the object has a deletion timestamp (finalizers or the garbage collector
    still hold it)."""
    return bool(meta(obj).get("deletionTimestamp"))


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True) -> dict[str, Any]:
    """An ownerReference to `owner`, for objects we render: garbage collection follows it."""
    m = meta(owner)
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": m["name"],
        "uid": m["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }
