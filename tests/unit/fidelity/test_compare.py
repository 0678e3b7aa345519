"""The fidelity test's comparison (tests/e2e/fidelity/_compare.py): what it reports as a
difference, how it names the place, and what the allowlist explains."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fidelity._compare import (
    ABSENT,
    Allowed,
    Difference,
    diff_objects,
    load_allowlist,
    normalise,
    report,
    unexplained,
)


def _daemonset(**pod: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "gpu-feature-discovery",
            "uid": "1",
            "resourceVersion": "7",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"deprecated.daemonset.template.generation": "3"},
            "ownerReferences": [{"kind": "ClusterPolicy", "name": "p", "uid": "9"}],
        },
        "spec": {"template": {"spec": pod}},
        "status": {"numberReady": 2},
    }


def _one(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(obj["kind"], obj["metadata"]["name"]): normalise(obj)}


def test_what_differs_from_run_to_run_is_no_difference() -> None:
    ours = _daemonset(containers=[{"name": "gfd", "image": "x"}])
    theirs = _daemonset(containers=[{"name": "gfd", "image": "x"}])
    theirs["metadata"].update(uid="2", resourceVersion="99", generation=1)
    theirs["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = "1"
    theirs["metadata"]["ownerReferences"][0]["uid"] = "8"
    theirs["status"] = {}
    assert diff_objects(_one(ours), _one(theirs)) == []


def test_containers_and_env_are_matched_by_name_and_the_place_is_named() -> None:
    ours = _daemonset(
        containers=[
            {"name": "config-manager", "image": "x"},
            {"name": "gfd", "image": "x", "env": [{"name": "A", "value": "1"}]},
        ]
    )
    theirs = _daemonset(
        containers=[
            {"name": "gfd", "image": "x", "env": [{"name": "A", "value": "2"}, {"name": "B"}]},
            {"name": "config-manager", "image": "x"},
        ]
    )
    found = diff_objects(_one(ours), _one(theirs))
    pod = "spec.template.spec.containers"
    assert found == [
        Difference("DaemonSet", "gpu-feature-discovery", f"{pod}[gfd].env[A].value", "1", "2"),
        Difference(
            "DaemonSet", "gpu-feature-discovery", f"{pod}[gfd].env[B]", ABSENT, {"name": "B"}
        ),
    ]


def test_init_containers_in_another_order_differ() -> None:
    ours = _daemonset(initContainers=[{"name": "a"}, {"name": "b"}])
    theirs = _daemonset(initContainers=[{"name": "b"}, {"name": "a"}])
    (found,) = diff_objects(_one(ours), _one(theirs))
    assert found.path == "spec.template.spec.initContainers[*order]"
    assert (found.ours, found.reference) == (["a", "b"], ["b", "a"])


def test_labels_are_named_in_brackets_and_a_missing_object_is_one_difference() -> None:
    ours, theirs = _daemonset(), _daemonset()
    ours["metadata"]["labels"] = {"app": "x", "app.kubernetes.io/managed-by": "gpu-operator"}
    theirs["metadata"]["labels"] = {"app": "x"}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "only-theirs"}}
    found = diff_objects(_one(ours), {**_one(theirs), **_one(account)})
    assert [(d.kind, d.path, d.ours, d.reference) for d in found] == [
        ("DaemonSet", "metadata.labels[app.kubernetes.io/managed-by]", "gpu-operator", ABSENT),
        ("ServiceAccount", "", ABSENT, account),
    ]


def test_an_entry_explains_its_path_and_below_for_the_objects_and_policies_it_names() -> None:
    difference = Difference(
        "DaemonSet",
        "nvidia-driver-daemonset",
        "spec.template.spec.containers[nvidia-driver-ctr].env[DRIVER_CONFIG_DIGEST].value",
        "a",
        "b",
    )
    entry = Allowed(
        "DaemonSet",
        "nvidia-driver-*",
        "spec.template.spec.containers[*].env[DRIVER_CONFIG_DIGEST]",
        "r",
    )
    assert entry.covers(difference, "sample")
    assert not Allowed("DaemonSet", "gpu-*", entry.path, "r").covers(difference, "sample")
    assert not Allowed("Deployment", "*", entry.path, "r").covers(difference, "sample")
    only_cdi = Allowed("DaemonSet", "*", entry.path, "r", policies=("cdi",))
    assert not only_cdi.covers(difference, "sample") and only_cdi.covers(difference, "cdi")
    # Brackets in a path are literal, not a glob's character class.
    assert not Allowed("DaemonSet", "*", "spec.template.spec.containers[n]", "r").covers(
        difference, "sample"
    )
    assert unexplained([difference], [entry], "sample") == []
    # A bracketed key with dots is one step of the path.
    data = Difference("ConfigMap", "c", "data[config.yaml][mig-configs][all-1g.10gb]", 1, 2)
    assert Allowed("ConfigMap", "c", "data[config.yaml][mig-configs]", "r").covers(data, "x")
    # "" is a whole object one side lacks, not everything in an object.
    whole = Allowed("DaemonSet", "nvidia-driver-*", "", "r")
    assert not whole.covers(difference, "sample")
    assert whole.covers(Difference("DaemonSet", "nvidia-driver-daemonset", "", {}, ABSENT), "x")


def test_an_entry_without_a_reason_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "allowed.yaml"
    path.write_text("- {kind: DaemonSet, name: '*', path: metadata.labels}\n")
    with pytest.raises(ValueError, match="entry 1 lacks reason"):
        load_allowlist(path)
    path.write_text("- {kind: DaemonSet, name: '*', path: '', reason: ours only}\n")
    assert load_allowlist(path)[0].reason == "ours only"


def test_the_report_groups_by_object_and_shows_both_sides() -> None:
    text = report(
        [
            Difference("DaemonSet", "gfd", "spec.x", 1, ABSENT),
            Difference("DaemonSet", "gfd", "spec.y", ABSENT, {"a": "b"}),
        ],
        "sample",
        Path("allowed-differences.yaml"),
    )
    assert text.splitlines() == [
        "2 difference(s) from NVIDIA's operator for policy 'sample' that "
        "allowed-differences.yaml does not explain (fix ours, or allow it there with a reason):",
        "  DaemonSet gfd",
        "    spec.x",
        "      ours:      1",
        "      reference: <absent>",
        "    spec.y",
        "      ours:      <absent>",
        "      reference: {a: b}",
    ]
