"""The CRDs' CEL rules evaluated from their own text (cel-python, with RE2 for `matches`
as the API server has), so `validate` judges by the very rule the API server runs rather
than by a Python restatement of it.

Transition rules (they read `oldSelf`) need the stored object and are left to the API
server. A rule whose evaluation fails (a type the rule does not expect) counts as broken,
as the API server reports such a rule as invalid."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import celpy


def is_transition(rule: str) -> bool:
    return "oldSelf" in rule


@cache
def _program(rule: str) -> celpy.Runner:
    import celpy  # only `validate` needs it, not the operator that imports this package

    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def holds(rule: str, value: Any) -> bool:
    """Whether `value` (JSON, nulls already dropped) satisfies `rule`."""
    from celpy.adapter import json_to_cel
    from celpy.evaluation import CELEvalError

    try:
        subject = json_to_cel(value)
    except (ValueError, OverflowError):
        # Not a CEL value (an integer beyond int64): the schema walk reports it, and the
        # API server runs no CEL rule on an object that failed its schema.
        return True
    try:
        result = _program(rule).evaluate({"self": subject})
    except CELEvalError:
        return False
    except (ValueError, OverflowError):
        return True  # arithmetic beyond int64 inside the rule: the same as above
    return not isinstance(result, CELEvalError) and bool(result)
