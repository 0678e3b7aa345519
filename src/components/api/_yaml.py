"""Reading YAML (and JSON) the way kubectl does, but stricter: duplicate keys are errors,
and a document that cannot be read says the line and column it broke on, in one sentence.

Hostile input is refused while it is read, before it can cost a traceback or the machine.
The parser's events (libyaml's C parser where PyYAML was built with it) are built into
values here, without PyYAML's graph of nodes (about 300 bytes a value, all held until the
document ends): nesting deeper than `MAX_DEPTH`, a document of more than `MAX_VALUES`
values (aliases expanded, so a "billion laughs" stops there too), a file of more than
`MAX_FILE_VALUES`, and an alias to a value that contains it are refused at the line they
are met. An integer too long for any int64 is never converted (Python refuses past 4,300
digits, and the conversion is quadratic): it stays a `LongInteger` for the checks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Protocol

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    MappingStartEvent,
    ScalarEvent,
    StreamEndEvent,
)

from components.api.limits import (
    ETCD_REFUSES,
    MAX_DEPTH,
    MAX_FILE_VALUES,
    MAX_VALUES,
)

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

_MAPPING_TAGS = (None, "!", "tag:yaml.org,2002:map")
_SEQUENCE_TAGS = (None, "!", "tag:yaml.org,2002:seq")
_MERGE_TAG = "tag:yaml.org,2002:merge"
#: Characters (sign and underscores left out) past which an integer is not converted:
#: longer than any int64 written in any base YAML has (binary: 0b and 64 digits).
_LONGEST_INTEGER = 80


@dataclass(frozen=True)
class LongInteger:
    """An integer written with more characters than any int64 takes, left unconverted;
    `fits_float64`: whether the API server can still read it (as a float64, inexactly)."""

    digits: int
    fits_float64: bool

    @staticmethod
    def of(text: str) -> LongInteger:
        """`text`: the integer's characters, without its sign or underscores."""
        try:
            value = float(text) if text.isdigit() else float(int(text, 0))  # 0x, 0o: linear
        except (ValueError, OverflowError):
            value = math.inf
        return LongInteger(len(text), math.isfinite(value))

    def __str__(self) -> str:
        return f"a {self.digits:,}-digit integer"


class YAMLProblem(Exception):
    """A YAML document that cannot be read, with the line it broke on."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class _Place(Protocol):
    """Where an event is (a pure-Python or a libyaml mark)."""

    line: int
    column: int


def _at(mark: _Place, message: str) -> YAMLProblem:
    return YAMLProblem(message, mark.line + 1, mark.column + 1)


def _too_many(number: int, aliased: bool) -> str:
    has = "expands through its aliases to" if aliased else "has"
    return (
        f"document {number} {has} more than {MAX_VALUES:,} values: its JSON would be over "
        f"{ETCD_REFUSES}; make it smaller"
    )


def _too_many_in_file() -> str:
    return (
        f"the file has more than {MAX_FILE_VALUES:,} values in all, more than validate reads "
        "from one file; split it into smaller files"
    )


class _Loader(_BaseLoader):
    """The safe loader's scalars, but timestamps stay strings (like kubectl), `=` and a
    `<<` that is not a key are strings, and an integer too long for int64 is not
    converted. Its collections are built by `_Reader`, never by its constructor."""


def _string(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


def _integer(loader: _Loader, node: yaml.ScalarNode) -> int | LongInteger:
    text = _string(loader, node).replace("_", "").lstrip("+-")
    if len(text) > _LONGEST_INTEGER:
        return LongInteger.of(text)
    return SafeConstructor.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _string)
_Loader.add_constructor("tag:yaml.org,2002:value", _string)
_Loader.add_constructor(_MERGE_TAG, _string)
_Loader.add_constructor("tag:yaml.org,2002:int", _integer)

_NO_KEY = object()


class _Collection:
    """A list or mapping being built, with what its document needs to know about it."""

    __slots__ = (
        "anchor",
        "before",
        "height",
        "key",
        "key_mark",
        "mark",
        "merges",
        "merging",
        "value",
    )

    def __init__(
        self, value: list[Any] | dict[Any, Any], anchor: str | None, mark: _Place, before: int
    ) -> None:
        self.value = value
        self.anchor = anchor
        self.mark = mark  # where it starts
        self.before = before  # values in the document before this one
        self.height = 1
        self.key: Any = _NO_KEY
        self.key_mark: _Place | None = None
        self.merging = False
        self.merges: list[dict[Any, Any]] = []

    def finish(self) -> list[Any] | dict[Any, Any]:
        """The value, with `<<` merges under the keys written (the first mapping wins)."""
        if isinstance(self.value, dict):
            for source in self.merges:
                for key, item in source.items():
                    self.value.setdefault(key, item)
        return self.value


class _Reader:
    """A YAML stream's documents, built from the parser's events."""

    def __init__(self, text: str) -> None:
        self.loader: Any = _Loader(text)  # libyaml's events are untyped
        self.file_values = 0
        #: Scalars already built, by (tag, text, implicit): every scalar is immutable.
        self.scalars: dict[tuple[Any, str, Any], tuple[Any, str]] = {}

    def documents(self) -> list[Any]:
        loader = self.loader
        documents: list[Any] = []
        try:
            loader.get_event()  # the stream's start
            while not loader.check_event(StreamEndEvent):
                loader.get_event()  # the document's start
                document = self._document(len(documents) + 1)
                loader.get_event()  # the document's end
                if document is not None:
                    documents.append(document)
            return documents
        finally:
            loader.dispose()

    def _scalar(self, event: Any) -> tuple[Any, str]:
        key = (event.tag, event.value, event.implicit)
        built = self.scalars.get(key)
        if built is not None:
            return built
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        constructors = self.loader.yaml_constructors
        built = (constructors.get(tag, constructors[None])(self.loader, node), tag)
        if len(event.value) <= 64 and len(self.scalars) < 65536:
            self.scalars[key] = built
        return built

    def _document(self, number: int) -> Any:
        loader = self.loader
        stack: list[_Collection] = []
        anchors: dict[str, tuple[Any, int, int]] = {}  # value, values, height
        building: dict[str, _Place] = {}  # anchors of collections not yet complete
        count = 0
        aliased = False
        while True:
            event = loader.get_event()
            mark = event.start_mark
            tag = None
            if isinstance(event, ScalarEvent):
                value, tag = self._scalar(event)
                size, height = 1, 0
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1, 0)
            elif isinstance(event, AliasEvent):
                if event.anchor in building:
                    raise _at(
                        building[event.anchor],
                        "invalid YAML: an alias refers to a value that contains it",
                    )
                if event.anchor not in anchors:
                    raise _at(mark, f"invalid YAML: found undefined alias {event.anchor!r}")
                value, size, height = anchors[event.anchor]
                aliased = aliased or size > 1
            elif isinstance(event, CollectionStartEvent):
                mapping = isinstance(event, MappingStartEvent)
                if event.tag not in (_MAPPING_TAGS if mapping else _SEQUENCE_TAGS):
                    raise _at(
                        mark,
                        f"invalid YAML: the tag {event.tag} is not supported (a Kubernetes "
                        "resource is plain JSON)",
                    )
                if len(stack) >= MAX_DEPTH:
                    raise _at(mark, f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
                stack.append(_Collection({} if mapping else [], event.anchor, mark, count))
                if event.anchor is not None:
                    anchors.pop(event.anchor, None)
                    building[event.anchor] = mark
                self._count(number, count + 1, 1, aliased, mark)
                count += 1
                continue
            else:  # the end of a list or mapping
                done = stack.pop()
                value, size, height = done.finish(), count - done.before, done.height
                if done.anchor is not None:
                    del building[done.anchor]
                    anchors[done.anchor] = (value, size, height)
                if stack:
                    self._add(stack[-1], value, height, done.mark, tag=None, depth=len(stack))
                    continue
                return value
            self._count(number, count + size, size, aliased, mark)
            count += size
            if not stack:
                return value
            self._add(stack[-1], value, height, mark, tag, depth=len(stack))

    def _count(self, number: int, total: int, added: int, aliased: bool, mark: _Place) -> None:
        """`added` values more, `total` in document `number`: refused past the limits."""
        self.file_values += added
        if total > MAX_VALUES:
            raise _at(mark, _too_many(number, aliased))
        if self.file_values > MAX_FILE_VALUES:
            raise _at(mark, _too_many_in_file())

    @staticmethod
    def _add(
        parent: _Collection, value: Any, height: int, mark: _Place, tag: str | None, depth: int
    ) -> None:
        if depth + height > MAX_DEPTH:  # an alias to a deep value, deep down
            raise _at(mark, f"invalid YAML: nested deeper than {MAX_DEPTH} levels")
        parent.height = max(parent.height, height + 1)
        if isinstance(parent.value, list):
            parent.value.append(value)
        elif parent.key is _NO_KEY:
            if isinstance(value, dict | list):  # `? [a]`: a Kubernetes key is a string
                raise _at(mark, "invalid YAML: a key must be a string")
            parent.key, parent.key_mark, parent.merging = value, mark, tag == _MERGE_TAG
        else:
            key, key_mark = parent.key, parent.key_mark
            parent.key = _NO_KEY
            if parent.merging:
                sources = value if isinstance(value, list) else [value]
                if not all(isinstance(source, dict) for source in sources):
                    raise _at(mark, "invalid YAML: << merges a mapping or a list of mappings")
                parent.merges.extend(sources)
            elif key in parent.value:
                raise _at(key_mark or mark, f"invalid YAML: duplicate key {key!r}")
            else:
                parent.value[key] = value


def _json_integer(text: str) -> int | LongInteger:
    digits = text.lstrip("-")
    return LongInteger.of(digits) if len(digits) > _LONGEST_INTEGER else int(text)


def _shape(value: Any) -> tuple[int, int]:
    """How deep parsed JSON goes and how many values (keys too) it holds, without
    recursion or an entry for each scalar (it stops counting past the limits)."""
    if not isinstance(value, dict | list):
        return 0, 1
    deepest, count = 0, 1
    stack = [(value, 1)]
    while stack and deepest <= MAX_DEPTH and count <= MAX_VALUES:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        count += len(children) + (len(item) if isinstance(item, dict) else 0)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest, count


def _json_values_at_most(text: str) -> int:
    """At most how many values (keys too) JSON text holds: every one but the first follows
    a `[`, `{`, `,` or `:`. Over `MAX_FILE_VALUES`, the text is read by the YAML reader
    instead (JSON is YAML's flow style), which counts as it goes: the JSON decoder would
    build every value first, up to 250 MiB for 4 MiB of `[[],[],...]`."""
    return 1 + sum(text.count(c) for c in "[{,:")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _load_json(text: str) -> list[Any]:
    """A stream of JSON values (kubectl reads `{...}{...}` too), each checked for depth
    and size."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_int=_json_integer)
    documents: list[Any] = []
    position = 0
    values = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        line = text.count("\n", 0, position) + 1
        try:
            document, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise YAMLProblem(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        except ValueError as exc:  # a duplicate key
            raise YAMLProblem(
                f"invalid JSON: {exc} in the value at this line", line, None
            ) from None
        depth, count = _shape(document)
        if depth > MAX_DEPTH:
            raise YAMLProblem(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", line, None)
        if count > MAX_VALUES:
            raise YAMLProblem(_too_many(len(documents) + 1, aliased=False), line, None)
        values += count
        if values > MAX_FILE_VALUES:
            raise YAMLProblem(_too_many_in_file(), line, None)
        documents.append(document)


def load_documents(text: str) -> list[Any]:
    """Every document of a YAML stream or JSON text (empty ones dropped). Raises
    `YAMLProblem`, never anything else for any text."""
    try:
        if text.lstrip()[:1] in ("{", "[") and _json_values_at_most(text) <= MAX_FILE_VALUES:
            try:
                return _load_json(text)
            except YAMLProblem as not_json:
                if not str(not_json).startswith("invalid JSON"):
                    raise  # too large: the same as YAML, and as slow to find out again
                # YAML flow style looks the same at first: let YAML judge it
        return _Reader(text).documents()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        if "nesting depth" in problem:  # libyaml's own limit, past ours
            problem = f"nested deeper than {MAX_DEPTH} levels"
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        raise YAMLProblem(f"invalid YAML: {problem}", line, column) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        what = f"character #x{exc.character:04x}" if isinstance(exc.character, int) else "byte"
        raise YAMLProblem(f"invalid YAML: {what} is not allowed in YAML", line, None) from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "not valid YAML"
        raise YAMLProblem(f"invalid YAML: {first}", None, None) from None
    except RecursionError:  # the JSON decoder, before the depth check can run
        raise YAMLProblem(
            f"invalid YAML: nested deeper than {MAX_DEPTH} levels", None, None
        ) from None
