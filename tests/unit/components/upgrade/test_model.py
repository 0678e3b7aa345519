"""Reading nodes, pods and revisions from the JSON the cache holds."""

from __future__ import annotations

from components.api import DRIVER_KERNEL_PIN_LABEL, KERNEL_LABEL, UpgradeState
from components.upgrade import (
    DRIVER_KERNEL_ANNOTATION,
    INITIALLY_UNSCHEDULABLE,
    SKIP_LABEL,
    STATE_LABEL,
    is_driver_pod,
    newest_revision,
    node_view,
    parse_time,
    pick_driver_pod,
    pod_view,
)

from .builders import driver, node_object


def test_node_view_reads_state_cordon_readiness_and_our_annotations() -> None:
    obj = node_object("a", "drain-required", **{SKIP_LABEL: "true", KERNEL_LABEL: "6.8.0"})
    obj["spec"]["unschedulable"] = True
    obj["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    obj["metadata"]["annotations"] = {INITIALLY_UNSCHEDULABLE: "true", "other": "x"}
    view = node_view(obj)
    assert view.state is UpgradeState.DRAIN_REQUIRED
    assert view.state_label == "drain-required"
    assert view.unschedulable and not view.ready and view.unavailable
    assert view.skip and view.kernel == "6.8.0"
    assert view.initially_unschedulable
    assert dict(view.annotations) == {INITIALLY_UNSCHEDULABLE: "true"}


def test_unknown_state_values_read_as_unknown_but_keep_the_label_for_compare() -> None:
    view = node_view(node_object("a", "something-else"))
    assert view.state is UpgradeState.UNKNOWN
    assert view.state_label == "something-else"


def test_a_node_without_a_ready_condition_counts_as_ready() -> None:
    obj = node_object("a")
    obj["status"] = {}
    assert node_view(obj).ready


def _pod(**spec: object) -> dict[str, object]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u",
            "creationTimestamp": "2026-11-30T10:00:00Z",
            "labels": {"app": "x"},
            "ownerReferences": [
                {"kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}
            ],
        },
        "spec": {"nodeName": "n1", **spec},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"ready": True, "restartCount": 0}],
        },
    }


def test_gpu_pods_are_those_requesting_gpu_or_mig_resources() -> None:
    def resources(**r: object) -> dict[str, object]:
        return {"containers": [{"name": "c", "resources": r}]}

    assert pod_view(_pod(**resources(limits={"nvidia.com/gpu": 1}))).gpu
    assert pod_view(_pod(**resources(requests={"nvidia.com/mig-1g.10gb": 1}))).gpu
    assert pod_view(_pod(**resources(limits={"nvidia.com/gpu.shared": 1}))).gpu
    assert not pod_view(_pod(**resources(limits={"cpu": 1}))).gpu
    assert not pod_view(_pod(**resources(limits={"nvidia.com/hostdev": 1}))).gpu
    init = {"initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
    assert pod_view(_pod(**init)).gpu


def test_pod_view_reads_owner_storage_readiness_and_creation() -> None:
    view = pod_view(_pod(volumes=[{"name": "scratch", "emptyDir": {}}]))
    assert view.owner_kind == "ReplicaSet" and view.managed and not view.daemonset
    assert view.local_storage and view.ready and view.active
    assert view.created == parse_time("2026-11-30T10:00:00Z")
    assert view.node == "n1"


def test_driver_kernel_comes_from_annotation_then_precompiled_node_selector() -> None:
    pod = _pod(nodeSelector={KERNEL_LABEL: "6.8.0-45-generic"})
    assert pod_view(pod).kernel == "6.8.0-45-generic"
    assert not pod_view(pod).kernel_recorded
    pod["metadata"]["annotations"] = {DRIVER_KERNEL_ANNOTATION: "6.8.0-50-generic"}  # type: ignore[index]
    assert pod_view(pod).kernel == "6.8.0-50-generic"
    assert pod_view(_pod()).kernel is None


def test_a_precompiled_driver_pod_serves_the_kernel_it_is_pinned_to() -> None:
    pod = _pod(nodeSelector={DRIVER_KERNEL_PIN_LABEL: "6.8.0-45-generic"})
    view = pod_view(pod)
    assert view.pinned and view.kernel == "6.8.0-45-generic"
    assert not pod_view(_pod(nodeSelector={KERNEL_LABEL: "6.8.0-45-generic"})).pinned
    node = node_view(node_object("a", None, **{DRIVER_KERNEL_PIN_LABEL: "6.8.0-45-generic"}))
    assert node.pinned_kernel == "6.8.0-45-generic"


def test_a_container_restarting_over_and_over_is_failing() -> None:
    pod = _pod()
    pod["status"] = {
        "phase": "Running",
        "containerStatuses": [{"ready": False, "restartCount": 11}],
    }
    view = pod_view(pod)
    assert view.failing and not view.ready


def test_driver_pods_are_recognised_by_the_reference_labels() -> None:
    assert is_driver_pod({"app": "nvidia-driver-daemonset"})
    assert is_driver_pod({"app.kubernetes.io/component": "nvidia-driver"})
    assert not is_driver_pod({"app": "nvidia-device-plugin-daemonset"})


def test_the_live_newest_driver_pod_speaks_for_the_node() -> None:
    old = driver("a", name="old", terminating=True, created=10)
    new = driver("b", name="new", created=20)
    assert pick_driver_pod([old, new]) is new
    assert pick_driver_pod([old]) is old
    assert pick_driver_pod([]) is None


def test_newest_revision_by_number_hash_from_label_or_name() -> None:
    revs = [
        {
            "metadata": {"name": "ds-aaa", "labels": {"controller-revision-hash": "aaa"}},
            "revision": 1,
        },
        {"metadata": {"name": "ds-ccc"}, "revision": 3},
        {"metadata": {"name": "ds-bbb"}, "revision": 2},
    ]
    assert newest_revision("ds", revs) == "ccc"
    assert newest_revision("ds", revs[:1]) == "aaa"
    assert newest_revision("ds", []) is None


def test_state_label_constant_is_the_reference_key() -> None:
    assert STATE_LABEL == "nvidia.com/gpu-driver-upgrade-state"
