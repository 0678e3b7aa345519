"""How many modules of `components.controllers` the ClusterPolicy reconcile reaches.

Static and reproducible: the transitive closure of the imports (module-level and in
functions) from the module that defines `ClusterPolicyController`, kept to the files under
`src/components/controllers/`. Usage: `python hack/reconcile_modules.py [-v]`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = "components.controllers"


def module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(name: str) -> set[str]:
    path = module_file(name)
    assert path is not None, name
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    # A package's __init__ runs on the way to its modules, but it is a face for other
    # callers, not a step of the reconcile: only modules are followed.
    return {
        m
        for m in out
        if m.startswith(ROOT) and (f := module_file(m)) is not None and f.name != "__init__.py"
    }


def entry() -> str:
    for path in sorted((SRC / "components" / "controllers").rglob("*.py")):
        if "class ClusterPolicyController" in path.read_text():
            rel = path.relative_to(SRC).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            return ".".join(parts)
    raise SystemExit("no ClusterPolicyController")


def closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(imports_of(name))
    return seen


if __name__ == "__main__":
    start = entry()
    found = closure(start)
    if "-v" in sys.argv:
        for name in sorted(found):
            print(name)
    print(f"{start}: {len(found)} modules of {ROOT} reached")
