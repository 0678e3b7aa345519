"""Offline validation of ClusterPolicy / NVIDIADriver / GPUCluster documents, with the
CRDs' rules.

The checks walk the very schemas written into the CRDs (`_crd.object_schema`) and run each
CEL rule from its text (`_cel`), so a file that passes here is accepted by the API server and
one that fails is rejected for the same reason (transition rules such as "driverType is
immutable" need the old object and are left to the API server). Two things are stricter
than a `kubectl apply`: unknown fields (the API server would silently drop them) and
duplicate keys are reported.

It reads what kubectl reads: YAML streams and JSON, a `kind: List` (its items), a top-level
YAML list of resources, a directory (its manifests), standard input. A document is judged
when it is ours (`is_ours`: any kind of nvidia.com, and a case or spelling variant of our
kinds); other resources in the same file are passed over, and a file with none of ours is
a problem. No input shows a traceback or takes the machine: what cannot be read is one
sentence (`_files`, and `components.api`'s bounded YAML reader), within the limits of
`components.api.limits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from components.api import YAMLProblem, load_documents
from components.api.limits import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILE_VALUES,
    MAX_OBJECT_BYTES,
    MAX_VALUES,
)
from components.offline._crd import KINDS
from components.offline._validate._files import (
    EXTENSIONS,
    Unreadable,
    expand,
    read_stream,
    read_text,
)
from components.offline._validate._problems import Problem, Report
from components.offline._validate._rules import is_ours, validate_document
from components.offline._validate._stacks import stack_problems

_STATUS_IGNORED = Problem(
    "",
    "status is ignored: the API server takes it only through the status subresource, so a "
    "create or apply drops it; leave it out of the file",
)


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


def validate_text(text: str, source: str = "<stdin>") -> Report:
    """Validate every ClusterPolicy / NVIDIADriver / GPUCluster in a YAML stream or JSON
    text, and the file as a whole (a GPUCluster beside a ClusterPolicy)."""
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
    ours: list[tuple[str | None, dict[str, Any]]] = []
    for label, document in resources(documents):
        if not is_ours(document):
            continue  # other resources in the same file are not ours to judge
        ours.append((label, document))
        problems = validate_document(document)
        found.extend((label, p) for p in problems)
        if problems:
            continue
        if "status" in document:
            warnings.append((label, _STATUS_IGNORED))
        passed.append((label, {k: v for k, v in document.items() if k != "status"}))
    if not ours:
        return Report(source, [(None, Problem("", f"no {known} found"))])
    across = stack_problems(ours)
    found.extend(across)
    refused = {label for label, _ in across}
    passed = [(label, d) for label, d in passed if label not in refused]
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


def validate_stream(stream: IO[bytes] | IO[str] | None, source: str = "<stdin>") -> Report:
    """Standard input (bytes where it has them, so bad encodings are reported), read no
    further than `MAX_FILE_BYTES`."""
    if stream is None:
        return Report(source, [(None, Problem("", "standard input is closed"))])
    try:
        text = read_stream(stream)
    except Unreadable as exc:
        return Report(source, [(None, Problem("", str(exc)))])
    return validate_text(text, source)


__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_FILE_VALUES",
    "MAX_OBJECT_BYTES",
    "MAX_VALUES",
    "Problem",
    "Report",
    "YAMLProblem",
    "is_ours",
    "load_documents",
    "resources",
    "validate_document",
    "validate_file",
    "validate_files",
    "validate_stream",
    "validate_text",
]
