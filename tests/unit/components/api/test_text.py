"""Long lists of names in messages are cut short, saying how many were left out."""

from __future__ import annotations

import pytest

from components.api import names_and_more

pytestmark = pytest.mark.unit


def test_short_lists_are_named_in_full() -> None:
    assert names_and_more(["a", "b"], 3) == "a, b"
    assert names_and_more(["a", "b", "c"], 3) == "a, b, c"
    assert names_and_more([], 3) == ""


def test_long_lists_say_how_many_more() -> None:
    assert names_and_more(["a", "b", "c", "d", "e"], 3) == "a, b, c and 2 more"
