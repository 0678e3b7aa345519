"""NVIDIADriver node pools: who serves which node, and conflicts as conditions."""

from __future__ import annotations

from typing import Any

import pytest

from components.controllers import assign, exclusion_terms
from components.controllers._selection import selects

pytestmark = pytest.mark.unit

OS = "feature.node.kubernetes.io/system-os_release.ID"


def driver(name: str, *, default: bool = False, selector: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"default": default}
    if selector is not None:
        spec["nodeSelector"] = selector
    return {"metadata": {"name": name}, "spec": spec}


def node(name: str, **labels: str) -> Any:
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true", **labels}},
    }


NODES = [node("u1", **{OS: "ubuntu"}), node("u2", **{OS: "ubuntu"}), node("r1", **{OS: "rhel"})]


def test_selector_pool_and_default_takes_the_rest() -> None:
    pools = assign([driver("rhel", selector={OS: "rhel"}), driver("rest", default=True)], NODES)
    assert not pools.conflicts
    assert pools.pools["rhel"].nodes == ("r1",)
    assert pools.pools["rest"].nodes == ("u1", "u2")
    assert pools.pools["rest"].exclude == ({OS: "rhel"},)


def test_overlapping_selectors_the_younger_gets_a_condition() -> None:
    pools = assign(
        [driver("all"), driver("rhel", selector={OS: "rhel"}), driver("other", default=True)],
        NODES,
    )
    assert pools.pools["all"].nodes == ("r1", "u1", "u2")
    reason, message = pools.conflicts["rhel"]
    assert reason == "ConflictingNodeSelector"
    assert "r1" in message and "NVIDIADriver all" in message
    assert "rhel" not in pools.pools
    assert pools.pools["other"].nodes == ()


def test_two_defaults_the_younger_gets_a_condition() -> None:
    pools = assign([driver("a", default=True), driver("b", default=True)], NODES)
    assert pools.conflicts["b"][0] == "MultipleDefaults"
    assert pools.pools["a"].nodes == ("r1", "u1", "u2")


def daemonset(terms: list[dict[str, Any]]) -> Any:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    return {"spec": {"template": {"spec": {"affinity": affinity}}}}


def test_exclusion_terms_admit_exactly_the_nodes_no_selector_matches() -> None:
    exclude = [{OS: "rhel"}, {OS: "ubuntu", "pool": "a"}]
    terms = exclusion_terms(exclude)
    assert terms is not None and len(terms) == 2
    ds = daemonset(terms)
    assert not selects(ds, node("r", **{OS: "rhel"}))
    assert not selects(ds, node("ua", **{OS: "ubuntu", "pool": "a"}))
    assert selects(ds, node("ub", **{OS: "ubuntu", "pool": "b"}))
    assert selects(ds, node("u", **{OS: "ubuntu"}))
    assert exclusion_terms([]) == []


def test_too_many_terms_are_refused() -> None:
    exclude = [{f"k{i}": "v", f"j{i}": "w"} for i in range(7)]  # 2**7 terms
    assert exclusion_terms(exclude) is None
