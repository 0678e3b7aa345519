"""Structural OpenAPI v3 schemas generated from the models (for the CRDs).

Every constraint comes from the model's annotations, so the CRD, pydantic and the offline
validator enforce the same rules:

* `bool`, `int`, `str`, `Literal[...]` (enum), `list[T]`, `dict[str, T]` (a map), models
  (objects, `nullable` so `section:` with no value round-trips), `X | None` (X)
* `Field(ge=, gt=, le=, min_length=, max_length=, pattern=)`: minimum, maxItems, pattern...
* markers from `_base`: `IntOrString`, `PreserveUnknown`, `Format`, `ListMap`, `Cel`
* `crd_default(...)`: the field's default is written as the schema's `default`
* a model's docstring and a field's `description` become descriptions
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from components.api import ApiModel, Cel, Format, IntOrString, ListMap, PreserveUnknown

Schema = dict[str, Any]


def _description(text: str | None) -> str | None:
    if not text:
        return None
    return " ".join(inspect.cleandoc(text).split())


def _apply_metadata(schema: Schema, metadata: list[Any]) -> None:
    rules: list[Schema] = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            schema["minimum"] = item.ge
        elif isinstance(item, annotated_types.Gt):
            schema["minimum"] = item.gt
            schema["exclusiveMinimum"] = True
        elif isinstance(item, annotated_types.Le):
            schema["maximum"] = item.le
        elif isinstance(item, annotated_types.MinLen):
            schema["minItems" if schema.get("type") == "array" else "minLength"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            schema["maxItems" if schema.get("type") == "array" else "maxLength"] = item.max_length
        elif isinstance(item, Format):
            schema["format"] = item.name
        elif isinstance(item, ListMap):
            schema["x-kubernetes-list-type"] = "map"
            schema["x-kubernetes-list-map-keys"] = [item.key]
        elif isinstance(item, Cel):
            rules.append(item.to_schema())
        elif isinstance(item, IntOrString | PreserveUnknown):
            continue  # handled where the type is decided
        elif getattr(item, "pattern", None):
            schema["pattern"] = item.pattern
    if rules:
        schema.setdefault("x-kubernetes-validations", []).extend(rules)


def schema_for_type(annotation: Any, metadata: list[Any] | None = None) -> Schema:
    """The schema of one annotation (with its `Annotated` metadata)."""
    meta = list(metadata or [])
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return schema_for_type(inner, [*extra, *meta])
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return schema_for_type(args[0], meta)
        if any(isinstance(m, IntOrString) for m in meta):
            schema: Schema = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
            pattern = next(m.pattern for m in meta if isinstance(m, IntOrString))
            if pattern:
                schema["pattern"] = pattern
            _apply_metadata(schema, meta)
            return schema
        raise TypeError(f"unsupported union in the API: {annotation!r}")

    if any(isinstance(m, PreserveUnknown) for m in meta):
        schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    elif origin is Literal:
        values = list(typing.get_args(annotation))
        schema = {"type": "string", "enum": values}
    elif origin is list:
        (item,) = typing.get_args(annotation)
        schema = {"type": "array", "items": schema_for_type(item)}
    elif origin is dict:
        _key, value = typing.get_args(annotation)
        schema = {"type": "object", "additionalProperties": schema_for_type(value)}
    elif annotation is bool:
        schema = {"type": "boolean"}
    elif annotation is int:
        schema = {"type": "integer"}
    elif annotation is str:
        schema = {"type": "string"}
    elif inspect.isclass(annotation) and issubclass(annotation, ApiModel):
        schema = schema_for_model(annotation)
    else:
        raise TypeError(f"unsupported type in the API: {annotation!r}")
    _apply_metadata(schema, meta)
    return schema


def _flag(info: FieldInfo, name: str) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get(name))


def _crd_default(info: FieldInfo) -> bool:
    return _flag(info, "crdDefault")


def _default_value(info: FieldInfo) -> Any:
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    return value


def schema_for_field(name: str, info: FieldInfo) -> Schema:
    """The schema of one model field."""
    if info.annotation is None:
        raise TypeError(f"field {name} has no type")
    schema = schema_for_type(info.annotation, list(info.metadata))
    if schema.get("type") == "object" and ("properties" in schema or _preserved(schema)):
        # An empty section (`plugin:` in YAML) is null: keep it rather than prune it.
        schema["nullable"] = True
    description = _description(info.description)
    if description:
        schema["description"] = description
    if _crd_default(info):
        schema["default"] = _default_value(info)
    return schema


def _preserved(schema: Schema) -> bool:
    return bool(schema.get("x-kubernetes-preserve-unknown-fields"))


def schema_for_model(model: type[ApiModel]) -> Schema:
    """The object schema of a model: properties sorted by wire name, as controller-gen does."""
    properties: dict[str, Schema] = {}
    required: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        properties[key] = schema_for_field(name, info)
        if info.is_required() or _flag(info, "crdRequired"):
            required.append(key)
    schema: Schema = {"type": "object"}
    description = _description(model.__doc__)
    if description:
        schema["description"] = description
    schema["properties"] = dict(sorted(properties.items()))
    if required:
        schema["required"] = sorted(required)
    if model.cel_rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in model.cel_rules]
    return schema
