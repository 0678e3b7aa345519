"""How a reason for rejection is reported: `Problem` (one, with its path or position),
`Report` (a file's), values shown as the API server shows them, and pydantic's errors
mapped to the same paths."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from components.api import ApiModel


@dataclass(frozen=True)
class Problem:
    """One reason a document would be rejected. `path` is like `spec.driver.version`."""

    path: str
    message: str
    line: int | None = None
    column: int | None = None

    def format(self, source: str, *, warning: bool = False) -> str:
        """`source: path: message` (`source:line:column: message` for YAML errors)."""
        message = f"warning: {self.message}" if warning else self.message
        if self.line is not None:
            where = f"{source}:{self.line}" + (f":{self.column}" if self.column else "")
            return f"{where}: {message}"
        if self.path:
            return f"{source}: {self.path}: {message}"
        return f"{source}: {message}"


@dataclass(frozen=True)
class Report:
    """Problems of one source (a file), ready to print. Each problem and warning carries
    where in the file it is (`document 2`, `item 3`, or None when the file holds one
    resource); `resources` are the resources of ours that passed, for later warnings."""

    source: str
    problems: list[tuple[str | None, Problem]]
    warnings: list[tuple[str | None, Problem]] = field(default_factory=list)
    resources: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def where(self, label: str | None) -> str:
        return self.source if label is None else f"{self.source} ({label})"

    def lines(self) -> Iterator[str]:
        for label, problem in self.problems:
            yield problem.format(self.where(label))
        for label, warning in self.warnings:
            yield warning.format(self.where(label), warning=True)


#: JSON's name for each Python type a parsed document holds; bool before int, whose
#: subclass it is.
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def type_name(value: Any) -> str:
    for python_type, name in _JSON_TYPES:
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return type_name(value)
    return str(value)


def show_typed(value: Any) -> str:
    kind = type_name(value)
    return kind if isinstance(value, dict | list) or value is None else f"{kind} {show(value)}"


def pydantic_problems(model: type[ApiModel], document: dict[str, Any]) -> Iterator[Problem]:
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
