"""What the fidelity test compares, field by field: the objects an operator left on the API
server, less what is run-specific, ours against the reference's, and the differences that
`allowed-differences.yaml` explains.

A difference is named by object (kind and name) and field path. Paths name list items by
their `name` where a list's items have unique names (containers, env, volumes), else by
`mountPath` (volume mounts of one volume at several paths), else by position; map keys that
are not plain words (labels, annotations, node selectors) go in brackets:

    spec.template.spec.initContainers[toolkit-validation].securityContext.runAsUser
    metadata.labels[app.kubernetes.io/managed-by]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Key = tuple[str, str]
"""(kind, name) of one object."""

ABSENT = "<absent>"

RUN_SPECIFIC_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
)
RUN_SPECIFIC_ANNOTATIONS = ("deprecated.daemonset.template.generation",)
"""The DaemonSet controller's count of template changes: how often an operator rewrote the
template on its way to the final one, not what the template is."""
RUN_SPECIFIC_SERVICE_FIELDS = ("clusterIP", "clusterIPs")

_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ORDERED_LISTS = frozenset({"initContainers"})
"""Lists whose order is behaviour (init containers run one after the other): an order
difference is a difference. Elsewhere items are matched by name wherever they are."""


def normalise(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` less what differs from run to run whoever made it (server-set metadata, owner
    uids, the status, a Service's allocated IPs), in a form whose differences read one by
    one: RBAC rules as single permissions, YAML in a ConfigMap parsed, mount paths without
    a trailing slash (the kubelet takes both alike)."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in RUN_SPECIFIC_METADATA}
    owners = [{k: v for k, v in o.items() if k != "uid"} for o in meta.get("ownerReferences", [])]
    if owners:
        meta["ownerReferences"] = owners
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k not in RUN_SPECIFIC_ANNOTATIONS
    }
    meta.pop("annotations", None)
    if annotations:
        meta["annotations"] = annotations
    out["metadata"] = meta
    if obj.get("kind") == "Service":
        out["spec"] = {
            k: v for k, v in (obj.get("spec") or {}).items() if k not in RUN_SPECIFIC_SERVICE_FIELDS
        }
    if obj.get("kind") in ("Role", "ClusterRole"):
        out["rules"] = permissions(obj.get("rules") or [])
    if obj.get("kind") == "ConfigMap" and obj.get("data"):
        out["data"] = {k: _parsed(k, v) for k, v in obj["data"].items()}
    trimmed: dict[str, Any] = _trimmed_mount_paths(out)
    return trimmed


def permissions(rules: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """Each permission the rules grant, as "group/resource[/name]: verb" ("" is the core
    group), so that two sets of rules differ permission by permission."""
    out = {}
    for rule in rules:
        for group in rule.get("apiGroups") or [""]:
            for resource in rule.get("resources") or rule.get("nonResourceURLs") or []:
                for name in rule.get("resourceNames") or [""]:
                    for verb in rule.get("verbs") or []:
                        out[f"{group}/{resource}{'/' + name if name else ''}: {verb}"] = True
    return dict(sorted(out.items()))


def _parsed(key: str, text: Any) -> Any:
    """A ConfigMap value that is a YAML file, parsed (its layout and comments are no
    difference); anything else as it is."""
    if not key.endswith((".yaml", ".yml")) or not isinstance(text, str):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _trimmed_mount_paths(value: Any) -> Any:
    if isinstance(value, list):
        return [_trimmed_mount_paths(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    out = {k: _trimmed_mount_paths(v) for k, v in value.items()}
    path = out.get("mountPath")
    if isinstance(path, str) and len(path) > 1:
        out["mountPath"] = path.rstrip("/")
    return out


@dataclass(frozen=True)
class Difference:
    kind: str
    name: str
    path: str
    """"" for an object only one side has."""
    ours: Any
    reference: Any

    def describe(self) -> str:
        ours, reference = _short(self.ours), _short(self.reference)
        where = self.path or "(the object)"
        return f"    {where}\n      ours:      {ours}\n      reference: {reference}"


def _short(value: Any) -> str:
    if value is ABSENT:
        return str(value)
    text = str(yaml.safe_dump(value, default_flow_style=True, width=10_000)).strip()
    return text.removesuffix("...").strip()


def _key_name(key: str) -> str:
    return f".{key}" if _WORD.match(key) else f"[{key}]"


def _item_keys(items: Sequence[Any]) -> list[str] | None:
    """A name per item, where the list's items can be matched by one: `name`, else
    `mountPath`, unique within the list."""
    for field_name in ("name", "mountPath"):
        keys = [i.get(field_name) if isinstance(i, Mapping) else None for i in items]
        if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys):
            return [str(k) for k in keys]
    return None


def diff_values(path: str, ours: Any, reference: Any) -> Iterator[tuple[str, Any, Any]]:
    """(path, ours, reference) for each place the two differ, as deep as both have it
    (labels and annotations one by one even where one side has none)."""
    if path.endswith((".labels", ".annotations")):
        ours = {} if ours is ABSENT else ours
        reference = {} if reference is ABSENT else reference
    if isinstance(ours, Mapping) and isinstance(reference, Mapping):
        for key in sorted(set(ours) | set(reference)):
            yield from diff_values(
                f"{path}{_key_name(key)}", ours.get(key, ABSENT), reference.get(key, ABSENT)
            )
        return
    if isinstance(ours, list) and isinstance(reference, list):
        ours_keys, reference_keys = _item_keys(ours), _item_keys(reference)
        if ours_keys is not None and reference_keys is not None:
            ours_by = dict(zip(ours_keys, ours, strict=True))
            reference_by = dict(zip(reference_keys, reference, strict=True))
            for key in sorted(set(ours_by) | set(reference_by)):
                yield from diff_values(
                    f"{path}[{key}]", ours_by.get(key, ABSENT), reference_by.get(key, ABSENT)
                )
            common = [k for k in ours_keys if k in reference_by]
            theirs = [k for k in reference_keys if k in ours_by]
            if path.rsplit(".", 1)[-1] in ORDERED_LISTS and common != theirs:
                yield f"{path}[*order]", common, theirs
            return
    if ours != reference:
        yield path, ours, reference


def diff_objects(ours: Mapping[Key, Any], reference: Mapping[Key, Any]) -> list[Difference]:
    """Every difference between two sets of normalised objects."""
    out: list[Difference] = []
    for key in sorted(set(ours) | set(reference)):
        kind, name = key
        if key not in ours or key not in reference:
            out.append(
                Difference(kind, name, "", ours.get(key, ABSENT), reference.get(key, ABSENT))
            )
            continue
        for path, a, b in diff_values("", ours[key], reference[key]):
            out.append(Difference(kind, name, path.lstrip("."), a, b))
    return out


# -- the allowlist -------------------------------------------------------------------------


def _pattern(glob: str) -> re.Pattern[str]:
    """`*` matches anything (dots and brackets too); everything else is literal."""
    return re.compile("^" + ".*".join(re.escape(part) for part in glob.split("*")) + "$")


@dataclass(frozen=True)
class Allowed:
    """One intended difference: objects of `kind` whose name matches `name`, at `path` or
    below it (globs: `*` matches anything; "" is an object only one side has), for the
    policies named (all when none)."""

    kind: str | tuple[str, ...]
    """A kind, several, or "*"."""
    name: str | tuple[str, ...]
    """A glob, or several (any matches)."""
    path: str
    reason: str
    policies: tuple[str, ...] = ()
    _names: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _path: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = (self.name,) if isinstance(self.name, str) else self.name
        object.__setattr__(self, "_names", tuple(_pattern(n) for n in names))
        object.__setattr__(self, "_path", _pattern(self.path))

    def covers(self, difference: Difference, policy: str) -> bool:
        if self.policies and policy not in self.policies:
            return False
        kinds = (self.kind,) if isinstance(self.kind, str) else self.kind
        if "*" not in kinds and difference.kind not in kinds:
            return False
        if not any(name.match(difference.name) for name in self._names):
            return False
        if not self.path or not difference.path:
            return self.path == difference.path
        path: str | None = difference.path
        while path:
            if self._path.match(path):
                return True
            path = _parent(path)
        return False


def _parent(path: str) -> str | None:
    """`a.b[c].d` -> `a.b[c]` -> `a.b` -> `a` -> `` -> None."""
    if not path:
        return None
    # A bracketed key may hold dots; a word never does.
    cut = path.rfind("[") if path.endswith("]") else path.rfind(".")
    return path[: max(cut, 0)]


def load_allowlist(path: Path) -> list[Allowed]:
    """The allowlist file: a list of {kind, name, path, reason[, policies]} (kind and name
    may be lists); an entry without a reason is refused (every intended difference says
    why)."""
    entries = yaml.safe_load(path.read_text()) or []
    out = []
    for i, entry in enumerate(entries):
        missing = [k for k in ("kind", "name", "reason") if not entry.get(k)]
        missing += [] if "path" in entry else ["path"]  # "" is the whole object
        if missing:
            raise ValueError(
                f"{path.name} entry {i + 1} lacks {', '.join(missing)}: every entry "
                "names kind, name, path and the reason the difference is intended"
            )
        out.append(
            Allowed(
                kind=_one_or_more(entry["kind"]),
                name=_one_or_more(entry["name"]),
                path=str(entry["path"]),
                reason=" ".join(str(entry["reason"]).split()),
                policies=tuple(entry.get("policies") or ()),
            )
        )
    return out


def _one_or_more(value: Any) -> str | tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else str(value)


def unexplained(
    differences: Iterable[Difference], allowlist: Sequence[Allowed], policy: str
) -> list[Difference]:
    return [d for d in differences if not any(a.covers(d, policy) for a in allowlist)]


def report(differences: Sequence[Difference], policy: str, allowlist: Path) -> str:
    """The differences, grouped by object, as the failure message."""
    lines = [
        f"{len(differences)} difference(s) from NVIDIA's operator for policy {policy!r} that "
        f"{allowlist.name} does not explain (fix ours, or allow it there with a reason):"
    ]
    last: Key | None = None
    for d in differences:
        if (d.kind, d.name) != last:
            lines.append(f"  {d.kind} {d.name}")
            last = (d.kind, d.name)
        lines.append(d.describe())
    return "\n".join(lines)
