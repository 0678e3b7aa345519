"""Objects are read through the accessors of `reconciler._objects` (`name_of`, `uid_of`,
`is_deleting`, `labels_of`, ... and `metadata_of` for a writer), never by a raw `metadata`
lookup: one place knows what an absent field reads as, so two readers of one object cannot
disagree (one `obj["metadata"]["uid"]` raises where `uid_of` says "").

Building an object (`{"metadata": {...}}`) is not a lookup and is fine anywhere."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src"

#: Where `metadata` may be read raw, and why.
HELPERS = {
    # The accessors themselves.
    "reconciler/_objects.py",
    # The offline validator judges a document's `metadata` as written, its type included:
    # an accessor would read a list there as {} and hide the problem the user must see.
    "components/offline/_validate/_rules.py",
}


def _lookups(tree: ast.AST) -> Iterator[int]:
    """Lines of `x["metadata"]`, `x.get("metadata", ...)`, `.setdefault` and `.pop` of it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "setdefault", "pop")
            and node.args
        ):
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and key.value == "metadata":
            yield node.lineno


def _raw_lookups(source: str) -> list[int]:
    return sorted(set(_lookups(ast.parse(source))))


def test_no_raw_metadata_lookup_outside_the_object_helpers() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name in HELPERS:
            continue
        found += [f"src/{name}:{line}" for line in _raw_lookups(path.read_text())]
    assert not found, "raw metadata lookups; use reconciler's accessors:\n" + "\n".join(found)


def test_every_file_allowed_raw_lookups_still_exists() -> None:
    for name in HELPERS:
        assert (SRC / name).is_file(), f"{name} is gone: take it off the list"


def test_each_lookup_form_is_seen_and_building_an_object_is_not() -> None:
    source = (
        'a = obj["metadata"]["name"]\n'
        'b = obj.get("metadata") or {}\n'
        'c = obj.setdefault("metadata", {})\n'
        'd = {"metadata": {"name": "x"}}\n'
        'e = obj.get("spec")\n'
    )
    assert _raw_lookups(source) == [1, 2, 3]
