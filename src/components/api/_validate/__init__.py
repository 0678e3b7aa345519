"""Offline validation of ClusterPolicy / NVIDIADriver documents, with the CRDs' rules.

The checks walk the very schemas written into the CRDs (`_crd.object_schema`) and run the
Python twin of each CEL rule, so a file that passes here is accepted by the API server and
one that fails is rejected for the same reason (transition rules such as "driverType is
immutable" need the old object and are left to the API server). Two things are stricter
than a `kubectl apply`: unknown fields (the API server would silently drop them) and
duplicate keys are reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from components.api._crd import KINDS
from components.api._validate._problems import Problem, Report
from components.api._validate._rules import is_ours, validate_document
from components.api._validate._yaml import YAMLProblem, load_documents


def validate_text(text: str, source: str = "<stdin>") -> Report:
    """Validate every ClusterPolicy / NVIDIADriver in a YAML stream."""
    try:
        documents = load_documents(text)
    except YAMLProblem as exc:
        return Report(source, [(None, Problem("", str(exc), exc.line, exc.column))])
    ours = [doc for doc in documents if is_ours(doc)]
    if not ours:
        known = " or ".join(k.kind for k in KINDS)
        return Report(source, [(None, Problem("", f"no {known} found"))])
    numbered = len(documents) > 1
    found: list[tuple[int | None, Problem]] = []
    for index, document in enumerate(documents, start=1):
        if not is_ours(document):
            continue  # other resources in the same file are not ours to judge
        found.extend((index if numbered else None, p) for p in validate_document(document))
    return Report(source, found)


def validate_files(paths: Iterable[str | Path]) -> list[Report]:
    """Validate files (`-` reads standard input is up to the caller)."""
    reports = []
    for path in paths:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            reports.append(Report(str(path), [(None, Problem("", f"cannot read: {reason}"))]))
            continue
        reports.append(validate_text(text, str(path)))
    return reports


__all__ = [
    "Problem",
    "Report",
    "YAMLProblem",
    "is_ours",
    "load_documents",
    "validate_document",
    "validate_files",
    "validate_text",
]
