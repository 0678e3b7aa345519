"""Which nodes are in remediation, for people: one entry per node with a state label."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from components.api import (
    REMEDIATION_GPU_ANNOTATION,
    REMEDIATION_REASON_ANNOTATION,
    REMEDIATION_SINCE_ANNOTATION,
    REMEDIATION_STATE_LABEL,
)
from reconciler import annotations_of, labels_of, name_of


def remediation_status(nodes: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """`[{"node", "step", "gpu", "reason", "since"}]`, by node name; nodes whose last
    remediation is done are left out (their label is only a record)."""
    out: list[dict[str, str]] = []
    for node in nodes:
        step = labels_of(node).get(REMEDIATION_STATE_LABEL)
        if not step or step == "done":
            continue
        notes = annotations_of(node)
        out.append(
            {
                "node": name_of(node),
                "step": step,
                "gpu": notes.get(REMEDIATION_GPU_ANNOTATION, ""),
                "reason": notes.get(REMEDIATION_REASON_ANNOTATION, ""),
                "since": notes.get(REMEDIATION_SINCE_ANNOTATION, ""),
            }
        )
    return sorted(out, key=lambda e: e["node"])
