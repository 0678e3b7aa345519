"""Rules across the documents of one file: the two GPU stacks exclude each other.

A GPUCluster (GPUs handed out through DRA ResourceClaims) and a ClusterPolicy (GPUs handed
out by the device plugin as `nvidia.com/gpu`) would both claim every GPU node: two owners
for the same devices, and DCGM and its exporter twice on each node. The reference calls
the pair an invalid configuration; a file that creates both is refused here before it
reaches a cluster. On a cluster the controllers refuse the later of the two with a
condition naming the other, and neither is torn down (`components.controllers._policies`).
"""

from __future__ import annotations

from typing import Any

from components.offline._crd import CLUSTER_POLICY, GPU_CLUSTER
from components.offline._validate._problems import Problem
from reconciler import name_of

Located = tuple[str | None, dict[str, Any]]


def _name(document: dict[str, Any]) -> str:
    return name_of(document) or "(no name)"


def _where(label: str | None) -> str:
    return f" ({label})" if label else ""


def stack_problems(ours: list[Located]) -> list[tuple[str | None, Problem]]:
    """One problem on each GPUCluster of a file that also holds a ClusterPolicy."""
    policies = [(label, d) for label, d in ours if d.get("kind") == CLUSTER_POLICY.kind]
    clusters = [(label, d) for label, d in ours if d.get("kind") == GPU_CLUSTER.kind]
    if not policies or not clusters:
        return []
    label, policy = policies[0]
    named = f"ClusterPolicy {_name(policy)}{_where(label)}"
    message = (
        f"a GPUCluster and a ClusterPolicy are an invalid configuration ({named} is in the "
        "same file): both would manage the same GPU nodes; keep one of them"
    )
    return [(where, Problem("kind", message)) for where, _ in clusters]
