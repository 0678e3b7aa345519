"""Offline validation of ClusterPolicy / NVIDIADriver documents, with the CRDs' rules.

The checks walk the very schemas written into the CRDs (`_crd.object_schema`) and run each
CEL rule from its text (`_cel`), so a file that passes here is accepted by the API server and
one that fails is rejected for the same reason (transition rules such as "driverType is
immutable" need the old object and are left to the API server). Two things are stricter
than a `kubectl apply`: unknown fields (the API server would silently drop them) and
duplicate keys are reported.

It reads what kubectl reads: YAML streams and JSON, a `kind: List` (its items), a top-level
YAML list of resources, a directory (its manifests). No input shows a traceback: what
cannot be read is one sentence (`_files`, `_yaml`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from components.api._crd import KINDS
from components.api._validate._files import (
    EXTENSIONS,
    Unreadable,
    decode,
    expand,
    mebibytes,
    read_text,
)
from components.api._validate._problems import Problem, Report
from components.api._validate._rules import is_ours, validate_document
from components.api._validate._yaml import MAX_DEPTH, YAMLProblem, load_documents

#: etcd refuses a request over 1.5 MiB by default, so the API server cannot store a larger
#: object (and it refuses a request body over 3 MiB before reading it).
MAX_OBJECT_BYTES = 1536 * 1024


def resources(documents: list[Any]) -> Iterator[tuple[str | None, Any]]:
    """Each resource with where it is, a `kind: ...List` and a top-level list flattened as
    kubectl flattens them (`document 2, item 3`; no label for a file of one resource)."""
    numbered = len(documents) > 1
    for index, document in enumerate(documents, start=1):
        label = f"document {index}" if numbered else None
        items = _items(document)
        if items is None:
            yield label, document
            continue
        for number, item in enumerate(items, start=1):
            yield (f"{label}, item {number}" if label else f"item {number}"), item


def _items(document: Any) -> list[Any] | None:
    if isinstance(document, list):
        return document
    if (
        isinstance(document, dict)
        and str(document.get("kind", "")).endswith("List")
        and isinstance(document.get("items"), list)
    ):
        return list(document["items"])
    return None


def _size_warning(document: dict[str, Any]) -> Problem | None:
    size = len(json.dumps(document, separators=(",", ":"), default=str).encode())
    if size <= MAX_OBJECT_BYTES:
        return None
    return Problem(
        "",
        f"this resource is {mebibytes(size)} as JSON, more than the API server can store "
        "(etcd takes 1.5 MiB per request; the API server reads at most 3 MiB)",
    )


def validate_text(text: str, source: str = "<stdin>") -> Report:
    """Validate every ClusterPolicy / NVIDIADriver in a YAML stream or JSON text."""
    known = " or ".join(k.kind for k in KINDS)
    if not text.strip():
        return Report(source, [(None, Problem("", f"the file is empty: no {known} found"))])
    try:
        documents = load_documents(text)
    except YAMLProblem as exc:
        return Report(source, [(None, Problem("", str(exc), exc.line, exc.column))])
    found: list[tuple[str | None, Problem]] = []
    warnings: list[tuple[str | None, Problem]] = []
    passed: list[tuple[str | None, dict[str, Any]]] = []
    seen = False
    for label, document in resources(documents):
        if not is_ours(document):
            continue  # other resources in the same file are not ours to judge
        seen = True
        problems = validate_document(document)
        found.extend((label, p) for p in problems)
        if (warning := _size_warning(document)) is not None:
            warnings.append((label, warning))
        if not problems:
            passed.append((label, document))
    if not seen:
        return Report(source, [(None, Problem("", f"no {known} found"))])
    return Report(source, found, warnings, passed)


def validate_file(path: Path) -> Report:
    """One file (`Unreadable` and the YAML's problems are the report's, never raised)."""
    try:
        text = read_text(path)
    except Unreadable as exc:
        return Report(str(path), [(None, Problem("", str(exc)))])
    return validate_text(text, str(path))


def validate_files(paths: Iterable[str | Path]) -> list[Report]:
    """Validate files and directories (`-` for standard input is up to the caller)."""
    reports = []
    for name in paths:
        path = Path(name)
        files = expand(path)
        if not files:
            wanted = ", ".join(f"*{e}" for e in EXTENSIONS)
            reports.append(Report(str(path), [(None, Problem("", f"has no {wanted} files"))]))
        reports.extend(validate_file(file) for file in files)
    return reports


def validate_bytes(data: bytes, source: str = "<stdin>") -> Report:
    """What standard input holds, decoded as a file's bytes are."""
    try:
        text = decode(data)
    except Unreadable as exc:
        return Report(source, [(None, Problem("", str(exc)))])
    return validate_text(text, source)


__all__ = [
    "MAX_DEPTH",
    "MAX_OBJECT_BYTES",
    "Problem",
    "Report",
    "YAMLProblem",
    "is_ours",
    "load_documents",
    "resources",
    "validate_bytes",
    "validate_document",
    "validate_file",
    "validate_files",
    "validate_text",
]
