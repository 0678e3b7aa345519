"""Which nodes a pod event asks the upgrade's node controller to look at again.

Every operand pod of a fresh rollout passes through this mapping, several events each, so
a request it makes for nothing is a reconcile per event at fleet scale."""

from __future__ import annotations

from typing import Any

import pytest

from components.upgrade import STATE_LABEL
from components.upgrade._reader import ClusterReader
from components.upgrade._watches import Watches
from reconciler import Request

pytestmark = pytest.mark.unit

NAMESPACE = "gpu-operator"


class Nodes:
    """Stands in for the cache: the mapping only gets nodes by name."""

    def __init__(self, **states: str) -> None:
        self.nodes = {
            name: {"metadata": {"name": name, "labels": {STATE_LABEL: state} if state else {}}}
            for name, state in states.items()
        }

    def get(self, gvk: Any, name: str, namespace: str | None = None) -> Any:
        return self.nodes.get(name) if gvk.kind == "Node" else None


def pod(app: str, node: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{app}-x", "namespace": NAMESPACE, "labels": {"app": app}},
        "spec": {"nodeName": node} if node else {},
    }


def requests_for(obj: dict[str, Any], **states: str) -> list[Request]:
    watches = Watches(ClusterReader(Nodes(**states), NAMESPACE))  # type: ignore[arg-type]
    return list(watches._pod_to_node(obj))


VALIDATOR = "nvidia-operator-validator"
DRIVER = "nvidia-driver-daemonset"


@pytest.mark.parametrize("state", ["", "upgrade-done", "upgrade-required"])
def test_a_validator_pod_on_a_node_in_no_upgrade_asks_for_nothing(state: str) -> None:
    assert requests_for(pod(VALIDATOR, "n1"), n1=state) == []


@pytest.mark.parametrize("state", ["pod-restart-required", "validation-required", "upgrade-failed"])
def test_a_validator_pod_on_a_node_being_upgraded_asks_for_its_node(state: str) -> None:
    assert requests_for(pod(VALIDATOR, "n1"), n1=state) == [Request("", "n1")]


def test_the_driver_pod_asks_for_its_node_in_any_state() -> None:
    assert requests_for(pod(DRIVER, "n1"), n1="upgrade-done") == [Request("", "n1")]
    assert requests_for(pod(DRIVER, "n1"), n1="") == [Request("", "n1")]


def test_a_pod_not_bound_to_a_node_asks_for_nothing() -> None:
    assert requests_for(pod(DRIVER, None), n1="validation-required") == []
