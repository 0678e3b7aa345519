"""Node affinity and node selectors, judged from cached objects as the scheduler would."""

from __future__ import annotations

import pytest

from components.api import daemon_pod_runs_on, node_selector_terms_match, pod_spec_targets
from components.api._affinity import tolerates

pytestmark = pytest.mark.unit


def test_node_affinity_and_node_selector() -> None:
    labels = {"kernel": "6.8", "gpu": "true", "count": "4"}
    terms = [
        {"matchExpressions": [{"key": "kernel", "operator": "In", "values": ["5.15"]}]},
        {"matchExpressions": [{"key": "count", "operator": "Gt", "values": ["2"]}]},
    ]
    assert node_selector_terms_match(terms, labels)
    assert not node_selector_terms_match(terms[:1], labels)
    spec = {
        "nodeSelector": {"gpu": "true"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms[:1]}}},
    }  # fmt: skip
    assert not pod_spec_targets(spec, labels)
    assert pod_spec_targets({"nodeSelector": {"gpu": "true"}}, labels)
    assert not pod_spec_targets({"nodeSelector": {"gpu": "false"}}, labels)


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
CORDONED = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
PREFERENCE = {"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}


def test_a_daemonsets_pods_go_where_their_tolerations_and_the_controllers_allow() -> None:
    """As the DaemonSet controller counts: a cordoned node still gets its pods (the
    controller tolerates that for every DaemonSet), a new node still tainted not-ready does
    not, a taint the template tolerates does not stop it, a mere preference never does."""
    spec = {
        "nodeSelector": {"gpu": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    gpu = {"gpu": "true"}
    assert daemon_pod_runs_on(spec, gpu, [])
    assert daemon_pod_runs_on(spec, gpu, [CORDONED, GPU_TAINT, PREFERENCE])
    assert not daemon_pod_runs_on(spec, gpu, [NOT_READY])
    assert not daemon_pod_runs_on(spec, {"gpu": "false"}, [])
    assert not daemon_pod_runs_on({"nodeSelector": {"gpu": "true"}}, gpu, [GPU_TAINT])
    # A NoExecute taint repels too; the network one only pods off the host network.
    network = {"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}
    assert not daemon_pod_runs_on(spec, gpu, [network])
    assert daemon_pod_runs_on({**spec, "hostNetwork": True}, gpu, [network])
    assert not daemon_pod_runs_on(spec, gpu, [{"key": "drain", "effect": "NoExecute"}])


def test_toleration_matching() -> None:
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert tolerates({"key": "k", "value": "v"}, taint)
    assert tolerates({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}, taint)
    assert not tolerates({"key": "k", "value": "w"}, taint)
    assert not tolerates({"key": "k", "value": "v", "effect": "NoExecute"}, taint)
    assert tolerates({"key": "k", "operator": "Exists"}, taint)
    assert tolerates({"operator": "Exists"}, taint)
    assert not tolerates({"key": "other", "operator": "Exists"}, taint)
