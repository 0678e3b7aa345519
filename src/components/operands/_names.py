"""The labels that mark what the operator owns and where operands run, and the rules that
turn strings into Kubernetes-valid names and node lists into condition messages."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from components.api import (
    COMPONENT_LABEL,
    DEPLOY_LABEL_PREFIX,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    names_and_more,
    opted_out,
)
from components.operands._contract import GPUNode

__all__ = [
    "COMPONENT_LABEL",
    "DCGM_APP",
    "DCGM_PORT",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "MAX_NAMED_NODES",
    "deploy_label",
    "name_list",
    "nodes_phrase",
    "safe_name",
    "short_hash",
    "wants_operand",
]

#: The standalone DCGM host engine's DaemonSet / Service name and port: `state-dcgm` serves
#: on it, the DCGM exporter connects to it.
DCGM_APP = "nvidia-dcgm"
DCGM_PORT = 5555

#: Most nodes a condition message names before it says "and N more".
MAX_NAMED_NODES = 10

_INVALID = re.compile(r"[^a-z0-9.-]+")
_DASHES = re.compile(r"-{2,}")


def short_hash(text: str, length: int = 8) -> str:
    """A stable, short hex digest of `text` (for names that must stay unique)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def safe_name(name: str, *, max_length: int = 63, unique_by: str | None = None) -> str:
    """`name` as a valid Kubernetes DNS label (also a valid label value).

    Lower case; characters other than `a-z 0-9 . -` become `-`; no leading or trailing
    punctuation. When it is longer than `max_length` (or `unique_by` is given), the end is
    cut and `-<hash>` of the original (or of `unique_by`) appended, so two long names that
    share a prefix stay different.
    """
    cleaned = _DASHES.sub("-", _INVALID.sub("-", name.lower())).strip("-.")
    if len(cleaned) <= max_length and unique_by is None:
        return cleaned or short_hash(name)
    suffix = short_hash(name if unique_by is None else unique_by)
    head = cleaned[: max_length - len(suffix) - 1].rstrip("-.")
    return f"{head}-{suffix}" if head else suffix


def name_list(names: Iterable[str]) -> str:
    """`a, b, c` (sorted), or `a, b, ... and 7 more` beyond `MAX_NAMED_NODES`."""
    return names_and_more(sorted(names), MAX_NAMED_NODES)


def nodes_phrase(names: Iterable[str], verb: tuple[str, str] = ("has", "have")) -> str:
    """`GPU node a has` / `GPU nodes a, b have` (the list as `name_list` writes it)."""
    ordered = list(names)
    if len(ordered) == 1:
        return f"GPU node {ordered[0]} {verb[0]}"
    return f"GPU nodes {name_list(ordered)} {verb[1]}"


def deploy_label(operand: str) -> str:
    """`nvidia.com/gpu.deploy.<operand>`."""
    return DEPLOY_LABEL_PREFIX + operand


#: On every node the labeller gave a VM workload (`vm-passthrough`, `vm-vgpu`), never on a
#: container node.
_VM_NODE_LABEL = DEPLOY_LABEL_PREFIX + "sandbox-validator"


def wants_operand(node: GPUNode, label: str) -> bool:
    """Whether a node should run a container operand: not opted out
    (`gpu.deploy.operands=false`) and the operand's deploy label is not `false`. Absent
    counts as wanted (the node labeller sets it soon), except on a node the labeller made a
    VM node: there the container stack's labels are absent because it must not run."""
    if opted_out(node.labels):
        return False
    if label not in node.labels and node.labels.get(_VM_NODE_LABEL) == "true":
        return False
    return node.labels.get(label, "true") not in ("false", "pre-installed")
