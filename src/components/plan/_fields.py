"""Which fields differ between an object as it is and as it would be: the paths a person
reads in a plan, with the fields the API server sets itself left out."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reconciler import annotations_of, metadata_of

SERVER_SET_METADATA = frozenset(
    {"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink"}
)
SERVER_SET_ANNOTATIONS = frozenset({"deprecated.daemonset.template.generation"})
"""Annotations the API server writes on its own (the DaemonSet controller's)."""


def comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without its status and the metadata the server sets."""
    kept = SERVER_SET_METADATA | {"annotations"}
    meta = {k: v for k, v in metadata_of(obj).items() if k not in kept}
    annotations = {k: v for k, v in annotations_of(obj).items() if k not in SERVER_SET_ANNOTATIONS}
    if annotations:
        meta = {**meta, "annotations": annotations}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def changed_fields(before: Any, after: Any, path: str = "") -> list[str]:
    """The paths where `after` differs from `before`; a list of named items (containers,
    env) is compared item by item under `[name]`."""
    return sorted(_diff(before, after, path))


def _diff(before: Any, after: Any, path: str) -> Iterator[str]:
    # A section set or removed whole is named by its fields.
    if before is None and isinstance(after, Mapping) and after:
        before = {}
    if after is None and isinstance(before, Mapping) and before:
        after = {}
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after), key=str):
            yield from _diff(before.get(key), after.get(key), f"{path}.{key}" if path else key)
        return
    if _named_list(before) and _named_list(after):
        old = {item["name"]: item for item in before}
        new = {item["name"]: item for item in after}
        if list(old) == list(new) or set(old) != set(new):
            for name in sorted(set(old) | set(new)):
                yield from _diff(old.get(name), new.get(name), f"{path}[{name}]")
            return
    if before != after:
        yield path


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in value
    )
