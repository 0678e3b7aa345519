"""Label selectors evaluated on cached objects, with apimachinery's semantics."""

from __future__ import annotations

import pytest

from components.upgrade import (
    SelectorError,
    label_selector_matches,
    parse_selector,
)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", {}, True),
        ("app=job", {"app": "job"}, True),
        ("app==job", {"app": "job"}, True),
        ("app=job", {"app": "web"}, False),
        ("app!=job", {}, True),
        ("app!=job", {"app": "job"}, False),
        ("app in (a, b)", {"app": "b"}, True),
        ("app in (a,b)", {"app": "c"}, False),
        ("app notin (a,b)", {"app": "c"}, True),
        ("app notin (a,b)", {}, True),
        ("batch", {"batch": ""}, True),
        ("batch", {}, False),
        ("!batch", {}, True),
        ("!batch", {"batch": "1"}, False),
        ("app=job,tier!=web, !legacy", {"app": "job", "tier": "db"}, True),
        ("app=job,tier!=web,!legacy", {"app": "job", "legacy": "y"}, False),
        ("nvidia.com/gpu-driver-upgrade-drain.skip!=true", {}, True),
    ],
)
def test_string_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(selector)(labels) is expected


@pytest.mark.parametrize("bad", ["app=", "app in a", "=x", "app ~ x", "app in (a"])
def test_bad_selectors_say_where(bad: str) -> None:
    if bad == "app=":
        # `app=` is the empty value, which apimachinery accepts.
        assert parse_selector(bad)({"app": ""})
        return
    with pytest.raises(SelectorError, match="label selector"):
        parse_selector(bad)


def test_label_selector_objects() -> None:
    sel = {
        "matchLabels": {"app": "db"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    assert label_selector_matches(sel, {"app": "db", "tier": "a"})
    assert not label_selector_matches(sel, {"app": "db", "tier": "c"})
    assert not label_selector_matches(sel, {"app": "db", "tier": "a", "legacy": "1"})
    assert label_selector_matches({}, {"anything": "x"})  # empty selects all
    assert not label_selector_matches(None, {"anything": "x"})  # absent selects none
