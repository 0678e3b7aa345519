"""Which nodes may enter the walk, from the verdicts on the images they will pull.

Nodes are grouped by image (one check per image, however many nodes need it). The rule is
per image: a node whose image is missing stays out, a node whose image is there goes on.
Driver images are per OS (and per kernel, precompiled), so one missing tag says nothing
about the others, and holding every node for it would stop a fleet for a problem it does
not have. An unreachable registry (or one that refuses us) blocks only in Strict mode: in
an air-gapped cluster the kubelets pull through a mirror the operator cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from components.api import PreflightMode, names_and_more
from components.preflight._client import Check, Verdict

CONDITION = "PreflightFailed"
EVENT_REASON = "PreflightFailed"
MISSING_REASON = "ImageMissing"
UNREACHABLE_REASON = "RegistryUnreachable"
PASSED_REASON = "ImagesPresent"
_NAMED = 10
"""Nodes named per image in a message; the rest are counted."""


@dataclass(frozen=True, slots=True)
class Finding:
    check: Check
    nodes: tuple[str, ...]
    blocks: bool

    def describe(self) -> str:
        """A blocking finding names the nodes it holds; a warning names only the image: the
        walk goes on for its nodes, and a list that changes with every node joining would
        rewrite the condition each time for nothing an admin can act on."""
        what = "is missing" if self.check.verdict is Verdict.MISSING else "could not be checked"
        detail = f" ({self.check.detail})" if self.check.detail else ""
        if not self.blocks:
            return f"image {self.check.image} {what}{detail}"
        names = names_and_more(self.nodes, _NAMED)
        plural = "s" if len(self.nodes) != 1 else ""
        return f"image {self.check.image} {what}{detail}, needed by node{plural} {names}"


@dataclass(frozen=True, slots=True)
class Gate:
    blocked: frozenset[str] = frozenset()
    """Nodes kept out of the walk (their image is missing, or unchecked in Strict mode)."""
    pending: frozenset[str] = frozenset()
    """Nodes whose image's first check has not answered yet (they wait for it)."""
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    def key(self) -> tuple[tuple[str, Verdict, bool], ...]:
        """What was found, without the nodes that need it: an Event says each change of
        this once; nodes joining or leaving a held image are not news."""
        return tuple((f.check.image, f.check.verdict, f.blocks) for f in self.findings)

    def condition(self) -> tuple[bool, str, str] | None:
        """`PreflightFailed`'s (status, reason, message); None when there is nothing to say
        (no image checked)."""
        if not self.findings:
            return None
        blocking = [f for f in self.findings if f.blocks]
        warnings = [f for f in self.findings if not f.blocks]
        if blocking:
            missing = any(f.check.verdict is Verdict.MISSING for f in blocking)
            reason = MISSING_REASON if missing else UNREACHABLE_REASON
            message = "; ".join(f.describe() for f in blocking)
            message = f"{message} (no driver walk starts on these nodes)"
            if warnings:
                message += "; not checked, going on: " + "; ".join(f.describe() for f in warnings)
            return True, reason, message
        message = "; ".join(f.describe() for f in warnings)
        return False, UNREACHABLE_REASON, f"the walk goes on unchecked: {message}"


def gate(needs: Mapping[str, str], checks: Mapping[str, Check | None], mode: PreflightMode) -> Gate:
    """`needs`: node -> the image it will pull; `checks`: image -> verdict (None: pending)."""
    if mode == "Off":
        return Gate()
    by_image: dict[str, list[str]] = {}
    for node, image in needs.items():
        by_image.setdefault(image, []).append(node)
    blocked: set[str] = set()
    pending: set[str] = set()
    findings: list[Finding] = []
    for image, nodes in sorted(by_image.items()):
        nodes.sort()
        check = checks.get(image)
        if check is None:
            pending.update(nodes)
            continue
        if check.verdict is Verdict.PRESENT:
            continue
        blocks = check.verdict is Verdict.MISSING or mode == "Strict"
        if blocks:
            blocked.update(nodes)
        findings.append(Finding(check, tuple(nodes), blocks))
    return Gate(frozenset(blocked), frozenset(pending), tuple(findings))
