"""The base model every API type derives from, and the markers the CRD generator reads.

Three promises hold for every model here:

* Field names are snake_case in Python and camelCase (the reference's JSON names) on the
  wire; `to_dict()` always writes the wire names.
* Nothing is lost on a round trip: unknown keys are kept (`extra="allow"`), only fields
  the input set are written back (`to_dict()`), and an explicit `null` (`plugin:` with no
  value in YAML) reads as "not set" (the default applies) yet is written back as `null`.
* Parsing is strict like the API server's schema: a string is not an integer, `true` is not
  a string. Constraints live in the annotations (`Field(ge=0)`, `pattern=`, `Literal`,
  the markers below) so the CRD generator and pydantic enforce one set of rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import core_schema

Check = Callable[[Any], bool]


@dataclass(frozen=True)
class Cel:
    """A CEL rule (`x-kubernetes-validations`) and the same rule in Python.

    `check` receives the JSON value the rule is attached to (a dict for a model-level rule,
    the field's value for a field-level one) with nulls already treated as absent, and
    returns True when the value is valid. `field_path` (relative, like `.nodeSelector`)
    points the API server's error at a child field.
    """

    rule: str
    message: str
    check: Check = field(compare=False)
    field_path: str | None = None
    reason: str | None = None
    #: Transition rules (they use `oldSelf`) are enforced by the API server only.
    transition: bool = False

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        if self.transition:
            return schema

        def _check(value: Any) -> Any:
            if not self.check(value):
                raise ValueError(self.message)
            return value

        return core_schema.no_info_after_validator_function(_check, schema)

    @classmethod
    def matching(cls, pattern: str, message: str) -> Self:
        """A string matching `pattern`, the same regular expression in CEL and in Python:
        anchored with `^` and `$`, since CEL's `matches` searches where `re.match` anchors
        at the start."""
        regex = re.compile(pattern)
        return cls(
            rule=f"self.matches('{pattern}')",
            message=message,
            check=lambda v: isinstance(v, str) and bool(regex.match(v)),
        )

    def to_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class IntOrString:
    """Marker: the value is an integer or a string (`x-kubernetes-int-or-string`).

    `pattern`, when given, constrains the string form (as Kubernetes' quantities do).
    """

    pattern: str | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        schema = handler(source)
        if self.pattern is None:
            return schema
        compiled = re.compile(self.pattern)

        def _check(value: Any) -> Any:
            if isinstance(value, str) and not compiled.search(value):
                raise ValueError(f"should match {self.pattern!r}")
            return value

        return core_schema.no_info_after_validator_function(_check, schema)


@dataclass(frozen=True)
class PreserveUnknown:
    """Marker: keep this object exactly as given (`x-kubernetes-preserve-unknown-fields`)."""


@dataclass(frozen=True)
class Format:
    """Marker: an OpenAPI `format` (`int32`, `int64`, `date-time`)."""

    name: str


@dataclass(frozen=True)
class ListMap:
    """Marker: a list keyed by one field (`x-kubernetes-list-type: map`)."""

    key: str


#: `json_schema_extra` flag: write the field's default into the CRD (`default:`), so the
#: API server fills it in as the reference's CRD does. Fields without it still have their
#: default in Python, but the stored object is left as the user wrote it.
CRD_DEFAULT: dict[str, Any] = {"crdDefault": True}


#: `json_schema_extra` flag: list the field in the CRD's `required` although Python has a
#: default for it (the reference requires it, and the API server's default or our writer
#: always fills it in, so a user never has to).
CRD_REQUIRED: dict[str, Any] = {"crdRequired": True}


def crd_default(value: Any, *, required: bool = False, **kwargs: Any) -> Any:
    """A field default that the CRD also declares (the API server fills it in).

    `required=True` also lists the field in the CRD's `required` (the default satisfies it).
    """
    extra = {**CRD_DEFAULT, **CRD_REQUIRED} if required else CRD_DEFAULT
    return Field(default=value, json_schema_extra=extra, **kwargs)


class ApiModel(BaseModel):
    """Base of every API model: camelCase wire names, strict types, lossless round trip."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
        strict=True,
        validate_default=False,
    )

    #: Model-level CEL rules (cross-field), checked by pydantic and written into the CRD.
    cel_rules: ClassVar[tuple[Cel, ...]] = ()

    _nulls: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="wrap")
    @classmethod
    def _strip_nulls(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        nulls: frozenset[str] = frozenset()
        if isinstance(data, dict):
            nulls = frozenset(k for k, v in data.items() if v is None)
            if nulls:
                data = {k: v for k, v in data.items() if v is not None}
            for rule in cls.cel_rules:
                if not rule.transition and not rule.check(data):
                    raise ValueError(rule.message)
        obj = handler(data)
        if nulls:
            obj._nulls = nulls
        return obj

    @model_serializer(mode="wrap")
    def _restore_nulls(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self._nulls and info.by_alias is not False and not info.exclude_none:
            for key in self._nulls:
                out.setdefault(key, None)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Parse the wire form (camelCase JSON/YAML). Raises `pydantic.ValidationError`."""
        return cls.model_validate(data)

    def to_dict(self, *, defaults: bool = False) -> dict[str, Any]:
        """The wire form.

        `defaults=False` (the default) writes exactly the fields that were set, so parsing
        and writing back loses and adds nothing. `defaults=True` writes every field with
        its effective value (use it for objects the operator writes in full, like status).
        """
        if defaults:
            return self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


#: An object kept exactly as given: any keys, any values, never pruned.
Preserved = Annotated[dict[str, Any], PreserveUnknown()]
