"""The GPUCluster's status: the ClusterPolicy's rules of precedence (`_status.policy_status`)
in the reference's fields (state, namespace, conditions), and the two states only a
GPUCluster has: refused beside an earlier ClusterPolicy, and deleted while claims hold it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.api import ClusterPolicyStatus, GPUClusterStatus
from components.controllers._policies import CLUSTER_POLICY_EXISTS
from components.controllers._status import Findings, policy_status, stored_status
from components.controllers.gpucluster._claims import named

CLAIMS_ALLOCATED = "ClaimsAllocated"


def _narrow(status: ClusterPolicyStatus) -> GPUClusterStatus:
    return GPUClusterStatus(
        state="ready" if status.state == "ready" else "notReady",
        namespace=status.namespace,
        observed_generation=status.observed_generation,
        conditions=status.conditions,
    )


def cluster_status(previous: Mapping[str, Any] | None, findings: Findings) -> GPUClusterStatus:
    """Ready, or not ready naming why, by the ClusterPolicy's rules."""
    return _narrow(policy_status(previous, findings))


def refused_status(
    previous: Mapping[str, Any] | None, *, namespace: str, generation: int, policy: str
) -> GPUClusterStatus:
    """Refused: the ClusterPolicy `policy` came first, and the two stacks do not run side
    by side."""
    message = (
        f"ClusterPolicy {policy} exists and came first: a ClusterPolicy and a GPUCluster "
        "cannot both be acted on (the device-plugin stack or the DRA stack); delete one"
    )
    findings = Findings(
        namespace=namespace, generation=generation, problems=[(CLUSTER_POLICY_EXISTS, message)]
    )
    return cluster_status(previous, findings)


def waiting_status(
    previous: Mapping[str, Any] | None,
    *,
    namespace: str,
    generation: int,
    claims: Sequence[str],
) -> GPUClusterStatus:
    """Being deleted, held by the claims allocated on its GPUs."""
    status = stored_status(GPUClusterStatus, previous)
    status.state = "notReady"
    status.namespace = namespace
    status.observed_generation = generation
    status.mark_not_ready(CLAIMS_ALLOCATED, waiting_message(claims))
    return status


def waiting_message(claims: Sequence[str]) -> str:
    return (
        f"deletion waits for {len(claims)} ResourceClaim(s) allocated on GPUs of the DRA "
        f"driver: {named(claims)}; the stack is removed once they are released"
    )
