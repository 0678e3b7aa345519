"""Label selectors, evaluated against cached objects instead of asking the API server.

Two shapes appear in the upgrade: the string form (`waitForCompletion.podSelector`,
`drain.podSelector`: `app=job,tier!=web,env in (a,b),!legacy`) and a `LabelSelector`
object (a PodDisruptionBudget's `selector`). The semantics are apimachinery's. (Node
affinity, which the controllers judge too, is `components.api`'s.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Labels = Mapping[str, str]


class SelectorError(ValueError):
    """A selector that does not parse; the message says where."""


_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|[A-Za-z0-9_./-]+)")
_WORD = re.compile(r"[A-Za-z0-9_./-]+")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise SelectorError(f"cannot parse label selector {text!r} at {text[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def __call__(self, labels: Labels) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!":
            return value is None
        if self.op in ("=", "in"):
            return value in self.values
        return value not in self.values  # "!=", "notin": a missing label matches


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[_Requirement, ...]

    def __call__(self, labels: Labels) -> bool:
        return all(r(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    """A matcher for a string label selector; the empty selector matches everything."""
    tokens = _tokens(text)
    requirements: list[_Requirement] = []
    i = 0

    def fail(what: str) -> SelectorError:
        found = tokens[i] if i < len(tokens) else "end of selector"
        return SelectorError(f"label selector {text!r}: expected {what}, found {found!r}")

    def expect(token: str) -> None:
        nonlocal i
        if i >= len(tokens) or tokens[i] != token:
            raise fail(repr(token))
        i += 1

    def word() -> str:
        nonlocal i
        if i >= len(tokens) or not _WORD.fullmatch(tokens[i]):
            raise fail("a name")
        i += 1
        return tokens[i - 1]

    def values() -> frozenset[str]:
        nonlocal i
        expect("(")
        out: set[str] = set()
        while i < len(tokens) and tokens[i] != ")":
            out.add(word())
            if i < len(tokens) and tokens[i] == ",":
                i += 1
        expect(")")
        return frozenset(out)

    while i < len(tokens):
        if tokens[i] == "!":
            i += 1
            requirements.append(_Requirement(word(), "!"))
        else:
            key = word()
            op = tokens[i] if i < len(tokens) else ","
            if op in ("=", "==", "!="):
                i += 1
                value = word() if i < len(tokens) and tokens[i] != "," else ""
                requirements.append(
                    _Requirement(key, "!=" if op == "!=" else "=", frozenset({value}))
                )
            elif op in ("in", "notin"):
                i += 1
                requirements.append(_Requirement(key, op, values()))
            elif op == ",":
                requirements.append(_Requirement(key, "exists"))
            else:
                raise fail(f"an operator after {key!r}")
        if i < len(tokens):
            expect(",")
    return Selector(tuple(requirements))


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Labels) -> bool:
    """A `metav1.LabelSelector` (matchLabels + matchExpressions). An empty selector matches
    everything; a missing one (None) matches nothing, as in policy/v1."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key = str(expr.get("key", ""))
        op = expr.get("operator")
        vals = [str(v) for v in expr.get("values") or []]
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
