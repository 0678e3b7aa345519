"""A renderer says what differs and leaves the skeleton to the shared builders (issue 49):
one that grows past a screen is copying the skeleton again, or doing two jobs."""

from __future__ import annotations

import ast

import pytest

from tests.tools import REPO

pytestmark = pytest.mark.unit

MOST_LINES = 40


def test_no_render_function_is_longer_than_a_screen() -> None:
    long = []
    for path in sorted((REPO / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
                "_render",
                "render",
            ):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MOST_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} {lines}")
    assert long == [], f"render functions over {MOST_LINES} lines: {long}"
