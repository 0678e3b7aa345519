"""Offline validation of ClusterPolicy / NVIDIADriver documents, with the CRDs' rules.

The checks walk the very schemas written into the CRDs (`_crd.object_schema`) and run the
Python twin of each CEL rule, so a file that passes here is accepted by the API server and
one that fails is rejected for the same reason (transition rules such as "driverType is
immutable" need the old object and are left to the API server). Two things are stricter
than a `kubectl apply`: unknown fields (the API server would silently drop them) and
duplicate keys are reported.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from components.api._base import ApiModel
from components.api._clusterpolicy import ClusterPolicy
from components.api._crd import CLUSTER_POLICY, KINDS, NVIDIA_DRIVER, cel_rules
from components.api._crd import object_schema as _object_schema
from components.api._nvidiadriver import NVIDIADriver
from components.api._schema import Schema

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MODELS: dict[str, type[ApiModel]] = {
    CLUSTER_POLICY.kind: ClusterPolicy,
    NVIDIA_DRIVER.kind: NVIDIADriver,
}


@dataclass(frozen=True)
class Problem:
    """One reason a document would be rejected. `path` is like `spec.driver.version`."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def format(self, source: str) -> str:
        """`source: path: message` (`source:line:column: message` for YAML errors)."""
        if self.line is not None:
            where = f"{source}:{self.line}" + (f":{self.column}" if self.column else "")
            return f"{where}: {self.message}"
        if self.path:
            return f"{source}: {self.path}: {self.message}"
        return f"{source}: {self.message}"


class YAMLProblem(Exception):
    """A YAML document that cannot be read, with the line it broke on."""

    def __init__(self, message: str, line: int | None, column: int | None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


# --- YAML reading ------------------------------------------------------------------------


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


# --- schema checks -----------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return _type_name(value)
    return str(value)


_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _SchemaChecker:
    def __init__(self) -> None:
        self.rules = cel_rules()
        self.problems: list[Problem] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def check(self, value: Any, schema: Schema, path: str) -> None:
        if value is None:
            # The API server keeps a null only where the schema is nullable and otherwise
            # drops it (or puts the default in its place): never an error.
            return
        if schema.get("x-kubernetes-int-or-string"):
            if not _TYPE_CHECKS["integer"](value) and not isinstance(value, str):
                self.add(path, f"must be an integer or a string, not {_show_typed(value)}")
                return
        elif "type" in schema:
            expected = schema["type"]
            if not _TYPE_CHECKS[expected](value):
                self.add(path, f"must be of type {expected}, not {_show_typed(value)}")
                return
        self._values(value, schema, path)
        if isinstance(value, dict):
            self._object(value, schema, path)
        elif isinstance(value, list):
            self._array(value, schema, path)
        self._cel(value, schema, path)

    def _values(self, value: Any, schema: Schema, path: str) -> None:
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            choices = ", ".join(_show(v) for v in enum)
            self.add(path, f"unsupported value {_show(value)}: must be one of {choices}")
        if isinstance(value, str):
            pattern = schema.get("pattern")
            if pattern and not re.search(pattern, value):
                self.add(path, f"{_show(value)} does not match the pattern {pattern}")
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                self.add(path, f"must be at most {schema['maxLength']} characters long")
            if "minLength" in schema and len(value) < schema["minLength"]:
                self.add(path, f"must be at least {schema['minLength']} characters long")
        elif _TYPE_CHECKS["number"](value):
            if "minimum" in schema and value < schema["minimum"]:
                self.add(path, f"must be greater than or equal to {schema['minimum']}, not {value}")
            if "maximum" in schema and value > schema["maximum"]:
                self.add(path, f"must be less than or equal to {schema['maximum']}, not {value}")

    def _object(self, value: dict[Any, Any], schema: Schema, path: str) -> None:
        properties: dict[str, Schema] = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
        for key, item in value.items():
            if not isinstance(key, str):
                self.add(path, f"keys must be strings, not {_show_typed(key)}")
                continue
            child = _join(path, key)
            if key in properties:
                self.check(item, properties[key], child)
            elif isinstance(additional, dict):
                self.check(item, additional, child)
            elif not preserve:
                hint = difflib.get_close_matches(key, list(properties), n=1)
                suffix = f' (did you mean "{hint[0]}"?)' if hint else ""
                self.add(child, f'unknown field "{key}"{suffix}')
        for key in schema.get("required", []):
            if value.get(key) is None and "default" not in properties.get(key, {}):
                self.add(_join(path, key), "required field is missing")

    def _array(self, value: list[Any], schema: Schema, path: str) -> None:
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self.add(path, f"must have at most {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, dict):
            for index, item in enumerate(value):
                self.check(item, items, f"{path}[{index}]")
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys:
            seen: set[tuple[Any, ...]] = set()
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    key = tuple(item.get(k) for k in keys)
                    if key in seen:
                        self.add(f"{path}[{index}]", f"duplicate entry for {_show(key[0])}")
                    seen.add(key)

    def _cel(self, value: Any, schema: Schema, path: str) -> None:
        subject = (
            {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value
        )
        for entry in schema.get("x-kubernetes-validations", []):
            rule = self.rules.get(entry["rule"])
            if rule is None:
                raise LookupError(f"CEL rule without a Python check: {entry['rule']}")
            if rule.transition:
                continue
            if not rule.check(subject):
                where = path + entry.get("fieldPath", "") if entry.get("fieldPath") else path
                self.add(where, entry["message"])


def _show_typed(value: Any) -> str:
    kind = _type_name(value)
    return kind if isinstance(value, dict | list) or value is None else f"{kind} {_show(value)}"


# --- documents ---------------------------------------------------------------------------


def _metadata_problems(metadata: Any) -> Iterator[Problem]:
    if not isinstance(metadata, dict):
        yield Problem("metadata", "required field is missing (an object with a name)")
        return
    name = metadata.get("name")
    if name is None and metadata.get("generateName"):
        return
    if not isinstance(name, str) or not name:
        yield Problem("metadata.name", "required field is missing")
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        yield Problem(
            "metadata.name",
            f"{_show(name)} is not a valid name: lower case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters",
        )


def _pydantic_problems(model: type[ApiModel], document: dict[str, Any]) -> Iterator[Problem]:
    try:
        model.from_dict({k: v for k, v in document.items() if k != "status"})
    except ValidationError as exc:
        for error in exc.errors():
            path = ".".join(
                f"[{p}]" if isinstance(p, int) else str(p)
                for p in error["loc"]
                if not (isinstance(p, str) and p in ("int", "str", "function-after"))
            ).replace(".[", "[")
            yield Problem(path, error["msg"])


def validate_document(document: Any) -> list[Problem]:
    """Problems of one document (an already-parsed YAML/JSON object)."""
    if not isinstance(document, dict):
        kind_of = _type_name(document)
        return [Problem("", f"must be an object (a Kubernetes resource), not {kind_of}")]
    api_version = document.get("apiVersion")
    kind_name = document.get("kind")
    kind = next((k for k in KINDS if k.kind == kind_name), None)
    if kind is None:
        known = " or ".join(f"{k.kind} ({k.api_version})" for k in KINDS)
        return [Problem("kind", f"{_show(kind_name)} is not a {known}")]
    if api_version != kind.api_version:
        wanted = f"must be {kind.api_version} for a {kind.kind}, not {_show(api_version)}"
        return [Problem("apiVersion", wanted)]
    problems = list(_metadata_problems(document.get("metadata")))
    checker = _SchemaChecker()
    schema = _object_schema(kind)
    for key, value in document.items():
        if key == "status":
            continue  # the status subresource: the API server ignores it on create/update
        if key not in schema["properties"]:
            checker.add(str(key), f'unknown field "{key}"')
        elif key == "spec":
            checker.check(value, schema["properties"]["spec"], "spec")
    problems.extend(checker.problems)
    if not problems:
        problems.extend(_pydantic_problems(_MODELS[kind.kind], document))
    return problems


def is_ours(document: Any) -> bool:
    """Whether a document claims to be a ClusterPolicy or NVIDIADriver."""
    return isinstance(document, dict) and any(k.kind == document.get("kind") for k in KINDS)


@dataclass(frozen=True)
class Report:
    """Problems of one source (a file), ready to print."""

    source: str
    problems: list[tuple[int | None, Problem]]

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> Iterator[str]:
        for index, problem in self.problems:
            source = self.source if index is None else f"{self.source} (document {index})"
            yield problem.format(source)


def validate_text(text: str, source: str = "<stdin>") -> Report:
    """Validate every ClusterPolicy / NVIDIADriver in a YAML stream."""
    try:
        documents = load_documents(text)
    except YAMLProblem as exc:
        return Report(source, [(None, Problem("", str(exc), exc.line, exc.column))])
    ours = [doc for doc in documents if is_ours(doc)]
    if not ours:
        known = " or ".join(k.kind for k in KINDS)
        return Report(source, [(None, Problem("", f"no {known} found"))])
    numbered = len(documents) > 1
    found: list[tuple[int | None, Problem]] = []
    for index, document in enumerate(documents, start=1):
        if not is_ours(document):
            continue  # other resources in the same file are not ours to judge
        found.extend((index if numbered else None, p) for p in validate_document(document))
    return Report(source, found)


def validate_files(paths: Iterable[str | Path]) -> list[Report]:
    """Validate files (`-` reads standard input is up to the caller)."""
    reports = []
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            reports.append(Report(str(path), [(None, Problem("", f"cannot read: {reason}"))]))
            continue
        reports.append(validate_text(text, str(path)))
    return reports


__all__ = [
    "Problem",
    "Report",
    "YAMLProblem",
    "is_ours",
    "load_documents",
    "validate_document",
    "validate_files",
    "validate_text",
]
