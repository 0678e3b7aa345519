"""Make objects small before they enter the cache.

At 5,000 nodes the cache is most of the operator's memory. `managedFields` alone is often
half of an object, and a Node's `status.images` more still; neither is read by a
controller. Repeated strings (keys, label values, condition types) are interned so that
5,000 copies of "lastHeartbeatTime" cost one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from reconciler._decode import Plan, build_plan
from reconciler._objects import Object, metadata_of

Path = Sequence[str]
"""Keys from the top of an object to the field to drop; `"*"` means every list element."""
Transform = Callable[[Object], Object]

DEFAULT_DROP: tuple[Path, ...] = (
    ("metadata", "managedFields"),
    ("metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"),
)
"""Dropped from every cached object: written by clients for their own bookkeeping."""

_INTERN_MAX = 1024  # beyond this, strings are rarely repeated (certificates, JSON blobs)


def drop_paths(obj: Object, paths: Iterable[Path]) -> None:
    """Delete each path (a sequence of keys) from `obj` in place, if present.

    A `"*"` step goes into every element of a list (or every value of a map), so
    `("status", "conditions", "*", "lastHeartbeatTime")` reaches each condition.
    """
    _drop(obj, build_plan(paths))


def _drop(node: Any, plan: Plan) -> None:
    """One walk of `node` along the plan of every path at once (the decoder's plan): a
    pod's sixty-odd paths share their first steps, and walking each alone cost more than
    decoding the pod."""
    kind = type(node)
    if kind is list:
        if "*" in plan:
            star = plan["*"]
            if star is None:
                node.clear()
            else:
                for child in node:
                    _drop(child, star)
        return
    if kind is not dict:
        return
    if "*" in plan:
        star = plan["*"]
        if star is None:
            node.clear()
            return
        for key in list(node):
            sub = plan.get(key, star)
            if sub is None:
                del node[key]
            else:
                _drop(node[key], sub)
        return
    for key, sub in plan.items():
        if key in node:
            if sub is None:
                del node[key]
            else:
                _drop(node[key], sub)


def intern_strings(value: Any) -> Any:
    """Return `value` with every dict key and every string value up to 1 KiB interned."""
    kind = type(value)
    if kind is dict:
        return _intern_dict(value)
    if kind is list:
        return _intern_list(value)
    if kind is str and len(value) <= _INTERN_MAX:
        return sys.intern(value)
    return value


# The two helpers below run for every field of every cached object: they test exact types
# (JSON only has these) and keep the work per field to a couple of bytecodes.
def _intern_dict(d: dict[str, Any]) -> dict[str, Any]:
    intern = sys.intern
    out = {}
    for key, value in d.items():
        kind = type(value)
        if kind is str:
            if len(value) <= _INTERN_MAX:
                value = intern(value)
        elif kind is dict:
            value = _intern_dict(value)
        elif kind is list:
            value = _intern_list(value)
        out[intern(key)] = value
    return out


def _intern_list(items: list[Any]) -> list[Any]:
    out = []
    for value in items:
        kind = type(value)
        if kind is str:
            if len(value) <= _INTERN_MAX:
                value = sys.intern(value)
        elif kind is dict:
            value = _intern_dict(value)
        elif kind is list:
            value = _intern_list(value)
        out.append(value)
    return out


def may_keep(schema: Any, path: Path) -> bool:
    """Whether an object decoded into `schema` (nested TypedDicts, `list[X] | None` for
    lists) can still hold `path`: every step is a key the TypedDict names, or runs into a
    field typed as anything else (`Any`, a plain dict), which keeps whatever comes."""
    node = schema
    for key in path:
        if key == "*":
            args = [a for a in get_args(node) if a is not type(None)]
            lists = [a for a in args if get_origin(a) is list] or (
                [node] if get_origin(node) is list else []
            )
            if not lists:
                return True
            node = get_args(lists[0])[0]
            continue
        if not is_typeddict(node):
            return True
        hints = get_type_hints(node)
        if key not in hints:
            return False
        node = hints[key]
    return True


class Trimmer:
    """What an informer does to each object before caching it."""

    def __init__(
        self,
        drop: Iterable[Path] = (),
        transform: Transform | None = None,
        *,
        intern: bool = True,
        schema: Any = None,
    ) -> None:
        """`schema`: decode into this TypedDict, keeping only what it names
        (`ObjectDecoder`); `drop` still applies to what it keeps."""
        self.paths: tuple[Path, ...] = DEFAULT_DROP + tuple(tuple(p) for p in drop)
        self.transform = transform
        self.intern = intern
        self.schema = schema
        self._plan = build_plan(p for p in self.paths if schema is None or may_keep(schema, p))
        """Only the paths the schema may let through: walking the others on every object
        would cost a third of what the schema saves (seventy paths on a pod)."""

    @property
    def decoder_paths(self) -> tuple[Path, ...]:
        """The paths worth leaving undecoded (the rest are decoded, then dropped here).

        The decoder skips a subtree by splitting each level above it into raw members, in
        Python: worth it for big subtrees near the top (`managedFields`, a Node's images, a
        Pod's volumes), a loss for a field in every container or condition, which msgspec
        decodes faster than it can be split around (a Pod's decode and trim: 38 us so, 49
        us with every path skipped while decoding, bench/cache_memory.py's pods)."""
        return tuple(p for p in self.paths if len(p) <= 2 and "*" not in p)

    def __call__(self, obj: Object, previous: Object | None = None) -> Object:
        """`obj` trimmed; `previous` is the cached copy it replaces, whose (interned) parts
        are reused where `obj` has equal ones: an update interns only what it changed."""
        _drop(obj, self._plan)
        meta = metadata_of(obj)
        if meta.get("annotations") == {}:
            del meta["annotations"]
        if self.transform is not None:
            obj = self.transform(obj)
        if self.intern:
            obj = intern_strings(obj) if previous is None else _reuse(obj, previous, 2)
        return obj


_MISSING: Any = object()


def _reuse(new: dict[str, Any], old: dict[str, Any], depth: int) -> dict[str, Any]:
    """`new` interned, sharing `old`'s values where they are equal (a C-level comparison,
    far cheaper than interning again), down to `depth` levels of maps."""
    intern = sys.intern
    out = {}
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before is value or (before is not _MISSING and before == value):
            value = before
        elif depth > 1 and type(value) is dict and type(before) is dict:
            value = _reuse(value, before, depth - 1)
        else:
            value = intern_strings(value)
        out[intern(key)] = value
    return out
