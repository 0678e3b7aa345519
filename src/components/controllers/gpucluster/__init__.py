"""The GPUCluster controller: from the GPUCluster, the GPU stack on Dynamic Resource
Allocation (NVIDIA's DRA driver, DCGM and its exporter, the DRA validator).

Built as the ClusterPolicy's is: parse, render every operand of the DRA registry
(`components.operands.DRA_OPERANDS`) into one immutable plan (`_operands.Plan`), apply,
prune, then judge readiness and write the status (`_controller`). A GPUCluster beside an
earlier ClusterPolicy is refused (`controllers._policies`); its deletion waits for the
ResourceClaims allocated on its GPUs (`_claims`). Its watches (`_events`) only map
events to requests.
"""

from components.controllers.gpucluster._controller import NAME, GPUClusterController
from components.controllers.gpucluster._operands import Plan, StackOperands, rendered_kinds

__all__ = ["NAME", "GPUClusterController", "Plan", "StackOperands", "rendered_kinds"]
