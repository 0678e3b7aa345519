"""The policy is not ready while a node still runs the reference operator's driver, even
when our driver DaemonSets (which stay off those nodes) are all ready."""

from __future__ import annotations

from components.controllers import Findings, OperandReadiness, policy_status
from components.controllers._takeover import with_reference_driver


def test_nodes_on_the_reference_driver_keep_the_driver_and_the_policy_not_ready() -> None:
    ours = OperandReadiness("state-driver", enabled=True, ready=True, nodes_desired=0)
    waiting = with_reference_driver(ours, {"gpu-1", "gpu-2"})
    assert not waiting.ready and waiting.not_ready_nodes == ["gpu-1", "gpu-2"]
    status = policy_status(
        None, Findings(namespace="ns", generation=1, operands=[waiting], gpu_nodes=2)
    )
    assert status.state == "notReady"
    assert "state-driver on gpu-1, gpu-2" in (status.condition("Ready").message or "")
    # Every node on ours: the readiness is ours alone.
    assert with_reference_driver(ours, set()) is ours
