"""What the API server's JSON decoding and etcd make of a document, whatever its schema
says: an integer outside int64 (read as an inexact float64, or, past float64, not read at
all), infinity or NaN (not JSON), and a size past what etcd stores for one object. Checked
before the schema walk, which a document the API server refuses outright is not worth
(and which a document that aliases expand to gigabytes must not get).

One pass over the document without recursion, each list or mapping measured once however
many aliases share it, holding no more than one frame per level of nesting."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from components.api import LongInteger
from components.api.limits import (
    ETCD_REFUSES,
    INT64_MAX,
    INT64_MIN,
    MAX_OBJECT_BYTES,
    mebibytes,
)
from components.offline._validate._problems import Problem, show


def _scalar_size(value: Any) -> int:
    """Bytes the value takes in compact JSON (escapes not counted: at least this)."""
    if isinstance(value, str):
        return (len(value) if value.isascii() else len(value.encode("utf-8", "replace"))) + 2
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, LongInteger):
        return value.digits
    if isinstance(value, int | float):
        return len(repr(value))
    return len(str(value)) + 2  # bytes (!!binary): a base64 string in JSON


def _number_problem(value: Any) -> tuple[str, bool] | None:
    """What is wrong with a number, and whether the API server cannot decode it at all."""
    if isinstance(value, bool):
        return None
    if isinstance(value, LongInteger) or (
        isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX
    ):
        undecodable = not value.fits_float64 if isinstance(value, LongInteger) else False
        says = (
            f"{value} is outside int64 ({INT64_MIN} to {INT64_MAX}), the range of the API "
            "server's JSON integers; write a smaller number"
        )
        return says, undecodable
    if isinstance(value, float) and not math.isfinite(value):
        return f"{show(value)} is not a number JSON can carry; write a finite number", True
    return None


def _join(path: str, key: Any, *, index: bool) -> str:
    if index:
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class _Frame:
    __slots__ = ("items", "path", "size", "value")

    def __init__(self, value: dict[Any, Any] | list[Any], path: str) -> None:
        self.value = value
        self.path = path
        self.items: Iterator[tuple[Any, Any]] = (
            iter(value.items()) if isinstance(value, dict) else enumerate(value)
        )
        self.size = 2 + max(len(value) - 1, 0)  # brackets and commas


def encoded_problems(document: dict[str, Any]) -> tuple[list[Problem], bool]:
    """Numbers the API server cannot read as written, each with its path, then the size
    if it is over `MAX_OBJECT_BYTES`; and whether the API server refuses the document
    outright (a number it cannot decode, or too large), before any schema check."""
    problems: list[Problem] = []
    refused = False
    sizes: dict[int, int] = {}  # lists and mappings measured, by id: aliases share them
    frames = [_Frame(document, "")]
    while frames:
        frame = frames[-1]
        is_mapping = isinstance(frame.value, dict)
        for key, child in frame.items:
            if is_mapping:
                frame.size += _scalar_size(key if type(key) is str else str(key)) + 1
            if isinstance(child, dict | list):
                if id(child) in sizes:
                    frame.size += sizes[id(child)]
                    continue
                frames.append(_Frame(child, _join(frame.path, key, index=not is_mapping)))
                break
            if type(child) is str and child.isascii():  # most values: the quick way
                frame.size += len(child) + 2
                continue
            frame.size += _scalar_size(child)
            if (found := _number_problem(child)) is not None:
                problems.append(Problem(_join(frame.path, key, index=not is_mapping), found[0]))
                refused = refused or found[1]
        else:
            frames.pop()
            sizes[id(frame.value)] = frame.size
            if frames:
                frames[-1].size += frame.size
    size = sizes[id(document)]
    if size > MAX_OBJECT_BYTES:
        problems.append(
            Problem(
                "",
                f"this resource is {mebibytes(size)} as JSON, more than {ETCD_REFUSES}; "
                "make it smaller",
            )
        )
        refused = True
    return problems, refused
