"""Reading YAML (and JSON) the way kubectl does, but stricter: duplicate keys are errors,
and a document that cannot be read says the line and column it broke on, in one sentence.

Hostile input is refused before it can cost a traceback or the machine: nesting deeper than
any resource of ours goes (`MAX_DEPTH`), aliases that expand into a "billion laughs"
(`MAX_NODES`) and recursive aliases. libyaml's C parser is used where PyYAML was built with
it (ten times faster on large files); its nodes carry the same line/column marks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

#: Deeper than any field of a ClusterPolicy or NVIDIADriver (about 15 levels); past this a
#: document is refused rather than walked.
MAX_DEPTH = 100
#: Nodes one document may expand to once aliases are followed (a 3 MiB object has far fewer).
MAX_NODES = 1_000_000


class YAMLProblem(Exception):
    """A YAML document that cannot be read, with the line it broke on."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class _Loader(_BaseLoader):
    """Safe YAML, but duplicate keys are errors and timestamps stay strings (like kubectl)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            seen = key in out
        except TypeError:  # an unhashable key, like `? [a]`
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a string", key_node.start_mark
            ) from None
        if seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
    return out


def _timestamp(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _check_shape(root: yaml.Node) -> None:
    """Refuse a document too deep, recursive, or expanding past `MAX_NODES` through aliases,
    without recursion (an alias is the same node object met again, so sizes are memoized)."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            if size[key] > MAX_NODES:
                raise _problem_at(node, f"aliases expand to more than {MAX_NODES:,} values")
            continue
        if key in size:
            continue
        if key in on_path:
            raise _problem_at(node, "an alias refers to a value that contains it")
        on_path.add(key)
        if len(on_path) > MAX_DEPTH:
            raise _problem_at(node, f"nested deeper than {MAX_DEPTH} levels")
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def _problem_at(node: yaml.Node, message: str) -> YAMLProblem:
    mark = node.start_mark
    return YAMLProblem(f"invalid YAML: {message}", mark.line + 1, mark.column + 1)


def _depth_of(value: Any) -> int:
    """How deep parsed JSON goes, without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _load_json(text: str) -> list[Any]:
    """A stream of JSON values (kubectl reads `{...}{...}` too), each checked for depth."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
    documents: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        try:
            document, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise YAMLProblem(f"invalid JSON: {exc.msg}", exc.lineno, exc.colno) from None
        except ValueError as exc:  # a duplicate key
            line = text.count("\n", 0, position) + 1
            raise YAMLProblem(
                f"invalid JSON: {exc} in the value at this line", line, None
            ) from None
        if _depth_of(document) > MAX_DEPTH:
            line = text.count("\n", 0, position) + 1
            raise YAMLProblem(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", line, None)
        documents.append(document)


def _load_yaml(text: str) -> list[Any]:
    loader = _Loader(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_shape(node)
            document = loader.construct_document(node)
            if document is not None:
                documents.append(document)
        return documents
    finally:
        loader.dispose()


def load_documents(text: str) -> list[Any]:
    """Every document of a YAML stream or JSON text (empty ones dropped). Raises
    `YAMLProblem`, never anything else for any text."""
    try:
        if text.lstrip()[:1] in ("{", "["):
            try:
                return _load_json(text)
            except YAMLProblem:
                pass  # YAML flow style looks the same at first: let YAML judge it
        return _load_yaml(text)
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
    except RecursionError:  # the pure-Python composer, before the depth check can run
        raise YAMLProblem(
            f"invalid YAML: nested deeper than {MAX_DEPTH} levels", None, None
        ) from None
