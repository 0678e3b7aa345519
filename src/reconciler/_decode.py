"""Decoding API objects from JSON without building what the cache will throw away.

A Node as the server sends it is mostly `managedFields` and `status.images`; decoding
them into Python objects only to drop them is most of the cost of a 5,000-node list. The
decoder walks the JSON lazily along the paths to drop: a level on such a path is split into
its raw members (msgspec scans them in C, allocating nothing), dropped members are never
decoded, and everything else is decoded whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any, TypedDict

import msgspec

from reconciler._objects import Object

Plan = dict[str, "Plan | None"]
"""Per key: None to drop it, a sub-plan to descend into; "*" applies to every member."""

_ANY = msgspec.json.Decoder()
_MAP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ENCODER = msgspec.json.Encoder()
_LBRACKET = ord("[")
_LBRACE = ord("{")


class _ListEnvelope(msgspec.Struct):
    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] | None = None


class _Event(msgspec.Struct):
    type: str
    object: msgspec.Raw


_ENVELOPE = msgspec.json.Decoder(_ListEnvelope)
_EVENT = msgspec.json.Decoder(_Event)
_OBJECT_EVENTS = (b'{"type":"ADDED",', b'{"type":"MODIFIED",', b'{"type":"DELETED",')
"""How the API server begins an event that carries an object of the watched kind (ERROR
and BOOKMARK events, and any event written otherwise, take the careful way)."""


def decode(raw: bytes | msgspec.Raw) -> Any:
    return _ANY.decode(raw)


def encode(value: Any) -> bytes:
    return _ENCODER.encode(value)


class _IdentityMeta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    generation: Any


class _Identity(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _IdentityMeta


_IDENTITY = msgspec.json.Decoder(_Identity)


def decode_identity(raw: bytes) -> Any:
    """An object's kind, name, namespace, uid, resourceVersion and generation, and nothing
    else: for a write whose caller does not read the answer (a node's is 24 KB, mostly
    `managedFields` and images, which msgspec so skips in C)."""
    return _IDENTITY.decode(raw)


@cache
def page_decoder(schema: Any) -> Callable[[bytes], Object]:
    """A `*List` answer as `{"metadata": ..., "items": [...]}`, its items decoded into
    `schema` (a TypedDict, as an informer's): a page of 500 pods so holds what is read of
    each, not the whole pods."""
    page = msgspec.defstruct(
        "_Page", [("metadata", dict[str, Any], {}), ("items", list[schema] | None, None)]
    )
    decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(page)

    def read(raw: bytes) -> Object:
        doc = decoder.decode(raw)
        return {"metadata": doc.metadata, "items": doc.items or []}

    return read


def build_plan(paths: Iterable[Sequence[str]]) -> Plan:
    plan: Plan = {}
    for path in paths:
        if not path:
            continue
        node: Plan | None = plan
        for key in path[:-1]:
            assert node is not None
            if key in node and node[key] is None:
                node = None  # an ancestor is dropped whole already
                break
            node = node.setdefault(key, {})
        if node is not None:
            node[path[-1]] = None
    return _fold_star(plan)


def _merge(a: Plan | None, b: Plan | None) -> Plan | None:
    if a is None or b is None:
        return None
    out: Plan = dict(a)
    for key, sub in b.items():
        out[key] = _merge(out[key], sub) if key in out else sub
    return out


def _fold_star(plan: Plan) -> Plan:
    """Let a "*" rule also apply to the keys named beside it, so each key has one plan."""
    star = plan.get("*", {})
    out: Plan = {}
    for key, sub in plan.items():
        merged = sub if key == "*" else _merge(sub, star)
        out[key] = None if merged is None else _fold_star(merged)
    return out


class ObjectDecoder:
    """Decodes objects, lists and watch events, leaving out the paths it was given, or
    keeping only what `schema` names.

    `schema` (a TypedDict, whose nested TypedDicts say what to keep of each level) is the
    fast way for a kind that comes in floods: msgspec skips every other field in C, where
    splitting around the dropped paths costs Python calls per member. A pod event so costs
    a third of its decode and trim (bench/decode_events.py)."""

    def __init__(self, drop: Iterable[Sequence[str]] = (), schema: Any = None) -> None:
        self.plan = build_plan(drop) if schema is None else {}
        self._typed = msgspec.json.Decoder(schema) if schema is not None else None
        # A watch event's object decoded in the same pass as its envelope: scanning the
        # envelope first, then its object again, made a pod event's decode and trim cost
        # 16 us where one pass costs 12, a node's 31 us where it costs 21
        # (bench/decode_events.py).
        self._split = schema is None and bool(self.plan)
        """The object's members come raw, for the plan to decode or skip one by one."""
        member: Any = dict[str, msgspec.Raw] if self._split else (schema or dict[str, Any])
        self._events: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
            msgspec.defstruct("_ObjectEvent", [("type", str), ("object", member)])
        )

    def object(self, raw: bytes | msgspec.Raw) -> Object:
        typed = self._typed
        value = typed.decode(raw) if typed is not None else self._decode(raw, self.plan)
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        return value

    def list(self, raw: bytes) -> tuple[list[Object], dict[str, Any]]:
        """A `*List` answer: its items (trimmed) and its list metadata."""
        envelope = _ENVELOPE.decode(raw)
        return [self.object(item) for item in envelope.items or ()], envelope.metadata

    def event(self, line: bytes) -> tuple[str, Object]:
        """One watch event: its type and its object (Status for ERROR, as sent)."""
        if line.startswith(_OBJECT_EVENTS):
            try:
                whole = self._events.decode(line)
            except msgspec.ValidationError:
                pass  # not an object of this kind after all: the careful way says what
            else:
                obj = whole.object
                return whole.type, self._members(obj, self.plan) if self._split else obj
        event = _EVENT.decode(line)
        if event.type in ("ERROR", "BOOKMARK"):
            obj = _ANY.decode(event.object)
            return event.type, obj if isinstance(obj, dict) else {}
        return event.type, self.object(event.object)

    def _decode(self, raw: bytes | msgspec.Raw, plan: Plan | None) -> Any:
        if not plan:
            return _ANY.decode(raw)
        view = memoryview(raw)
        if not view:
            return _ANY.decode(raw)
        first = view[0]
        star = plan.get("*", {})
        if first == _LBRACKET and "*" in plan:
            if star is None:
                return []
            return [self._decode(member, star) for member in _LIST.decode(raw)]
        if first != _LBRACE:
            return _ANY.decode(raw)  # null, a scalar, or a list the plan does not reach into
        return self._members(_MAP.decode(raw), plan)

    def _members(self, members: dict[str, msgspec.Raw], plan: Plan) -> dict[str, Any]:
        star = plan.get("*", {})
        out: dict[str, Any] = {}
        for key, member in members.items():
            sub = plan.get(key, star if "*" in plan else {})
            if sub is None:
                continue
            out[key] = self._decode(member, sub)
        return out
