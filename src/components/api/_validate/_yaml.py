"""Reading YAML the way kubectl does, but stricter: duplicate keys are errors, and a
document that cannot be read says the line and column it broke on."""

from __future__ import annotations

from typing import Any

import yaml


class YAMLProblem(Exception):
    """A YAML document that cannot be read, with the line it broke on."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class _Loader(yaml.SafeLoader):
    """Safe YAML, but duplicate keys are errors and timestamps stay strings (like kubectl)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
    return out


def _timestamp(loader: _Loader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def load_documents(text: str) -> list[Any]:
    """Every document of a YAML stream (empty ones dropped). Raises `YAMLProblem`."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        line = mark.line + 1 if mark else None
        column = mark.column + 1 if mark else None
        raise YAMLProblem(f"invalid YAML: {problem}", line, column) from exc
    except yaml.YAMLError as exc:
        raise YAMLProblem(f"invalid YAML: {exc}", None, None) from exc
