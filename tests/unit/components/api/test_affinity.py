"""Node affinity and node selectors, judged from cached objects as the scheduler would."""

from __future__ import annotations

import pytest

from components.api import node_selector_terms_match, pod_spec_targets

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
