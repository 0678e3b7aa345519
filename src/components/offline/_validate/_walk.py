"""The walk over a document along the CRD's OpenAPI schema: types, enums, patterns,
bounds, unknown and required fields, list-map keys, and each CEL rule the schema carries,
evaluated from its text (`_cel`)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from components.offline._schema import Schema
from components.offline._validate._cel import holds, is_transition
from components.offline._validate._problems import Problem, show, show_typed

_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}

#: The integer formats the API server checks (a value out of range is refused).
_INTEGER_FORMATS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class SchemaChecker:
    def __init__(self) -> None:
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
                self.add(path, f"must be an integer or a string, not {show_typed(value)}")
                return
        elif "type" in schema:
            expected = schema["type"]
            if not _TYPE_CHECKS[expected](value):
                self.add(path, f"must be of type {expected}, not {show_typed(value)}")
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
            choices = ", ".join(show(v) for v in enum)
            self.add(path, f"unsupported value {show(value)}: must be one of {choices}")
        if isinstance(value, str):
            pattern = schema.get("pattern")
            if pattern and not re.search(pattern, value):
                self.add(path, f"{show(value)} does not match the pattern {pattern}")
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                self.add(path, f"must be at most {schema['maxLength']} characters long")
            if "minLength" in schema and len(value) < schema["minLength"]:
                self.add(path, f"must be at least {schema['minLength']} characters long")
        elif _TYPE_CHECKS["number"](value):
            bounds = _INTEGER_FORMATS.get(schema.get("format", ""))
            if bounds and isinstance(value, int) and not bounds[0] <= value <= bounds[1]:
                self.add(
                    path,
                    f"must fit in {schema['format']} ({bounds[0]} to {bounds[1]}), not {value}",
                )
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
                self.add(path, f"keys must be strings, not {show_typed(key)}")
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
                        self.add(f"{path}[{index}]", f"duplicate entry for {show(key[0])}")
                    seen.add(key)

    def _cel(self, value: Any, schema: Schema, path: str) -> None:
        subject = (
            {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value
        )
        for entry in schema.get("x-kubernetes-validations", []):
            if is_transition(entry["rule"]):
                continue
            if not holds(entry["rule"], subject):
                where = path + entry.get("fieldPath", "") if entry.get("fieldPath") else path
                self.add(where, entry["message"])
