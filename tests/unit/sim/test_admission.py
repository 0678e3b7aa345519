"""The simulated kubelet's device admission: which GPU pods a node may start, and the
status a refused one gets (the arithmetic of the kubelet's device manager)."""

from __future__ import annotations

from typing import Any

import pytest

from gpusim import gpu_node, node_manifest
from gpusim._admission import (
    ANNOTATION_ADMITTED,
    STAGE_GATE,
    DevicePod,
    Rejection,
    admit,
    allocate,
    device_pod,
    gate_pod_ready,
    holds,
)
from gpusim._node_model import plan_node
from gpusim._node_software import NodeSoftware, PodInfo, node_info, trim_pod

pytestmark = pytest.mark.unit

GPU = "nvidia.com/gpu"
MIG = "nvidia.com/mig-1g.10gb"


def _container(name: str) -> dict[str, Any]:
    """A container that asks for no device."""
    return {"name": name, "image": "busybox", "resources": {"limits": {"cpu": "1"}}}


def _pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    name: str = "train",
    created: str = "2026-01-01T00:00:00Z",
    phase: str = "Pending",
    node: str | None = "n1",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if node is not None:
        spec["nodeName"] = node
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ml",
        "uid": f"uid-{name}",
        "creationTimestamp": created,
    }
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def _gpus(name: str, count: int, resource: str = GPU) -> dict[str, Any]:
    return {"name": name, "image": "cuda", "resources": {"limits": {resource: str(count)}}}


def _sidecar(count: int) -> dict[str, Any]:
    return {**_gpus("sidecar", count), "restartPolicy": "Always"}


def _device_pod(pod: dict[str, Any]) -> DevicePod:
    found = device_pod(pod)
    assert found is not None
    return found


def _refusal(why: str) -> str:
    return f"Pod was rejected: Allocate failed due to {why}, which is unexpected"


def test_a_pod_that_fits_is_admitted_and_one_too_many_is_refused_as_the_kubelet_does() -> None:
    pod = _device_pod(_pod(_gpus("cuda", 2)))
    assert allocate(pod, {GPU: 2}, {}) == {GPU: 2}
    refused = allocate(pod, {GPU: 8}, {GPU: 7})
    assert isinstance(refused, Rejection)
    assert refused.status == {
        "phase": "Failed",
        "reason": "UnexpectedAdmissionError",
        "message": _refusal(
            "requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1"
        ),
    }


def test_a_node_whose_device_plugin_is_gone_refuses_every_gpu_pod() -> None:
    pod = _device_pod(_pod(_gpus("cuda", 1)))
    for offered in ({}, {GPU: 0}, {MIG: 7}):
        refused = allocate(pod, offered, {})
        assert isinstance(refused, Rejection)
        assert refused.status["message"] == _refusal(
            "no healthy devices present; cannot allocate unhealthy devices nvidia.com/gpu"
        )


def test_mig_devices_are_counted_per_profile() -> None:
    mixed = _device_pod(_pod(_gpus("a", 3, MIG), _gpus("b", 1, "nvidia.com/mig-3g.40gb")))
    offered = {MIG: 7, "nvidia.com/mig-3g.40gb": 2}
    assert allocate(mixed, offered, {MIG: 4}) == {MIG: 3, "nvidia.com/mig-3g.40gb": 1}
    refused = allocate(mixed, offered, {MIG: 5})
    assert isinstance(refused, Rejection)
    assert "unavailable for nvidia.com/mig-1g.10gb. Requested: 3, Available: 2" in refused.message


def test_app_containers_add_up() -> None:
    pod = _device_pod(_pod(_gpus("a", 2), _gpus("b", 2), _container("log")))
    assert holds(pod) == {GPU: 4}
    assert allocate(pod, {GPU: 4}, {}) == {GPU: 4}
    # The first container gets its two; the second finds one left.
    refused = allocate(pod, {GPU: 3}, {})
    assert isinstance(refused, Rejection)
    assert "Requested: 2, Available: 1" in refused.message


@pytest.mark.parametrize(
    ("init", "app", "held"),
    [
        ((3,), (1, 1), 3),  # the largest init container: its devices go on to the apps
        ((1,), (2, 2), 4),  # the apps' sum
        ((2, 1), (1,), 2),  # init containers run one after the other, reusing devices
        ((1, 3), (2,), 3),
    ],
)
def test_init_containers_count_as_their_largest_against_the_sum_of_the_apps(
    init: tuple[int, ...], app: tuple[int, ...], held: int
) -> None:
    pod = _device_pod(
        _pod(
            *(_gpus(f"app{i}", n) for i, n in enumerate(app)),
            init=tuple(_gpus(f"init{i}", n) for i, n in enumerate(init)),
        )
    )
    assert holds(pod) == {GPU: held}
    assert allocate(pod, {GPU: held}, {}) == {GPU: held}
    assert isinstance(allocate(pod, {GPU: held - 1}, {}), Rejection)


def test_an_init_container_short_of_devices_is_refused_with_its_own_count() -> None:
    pod = _device_pod(_pod(_gpus("app", 1), init=(_gpus("init", 3),)))
    refused = allocate(pod, {GPU: 4}, {GPU: 2})
    assert isinstance(refused, Rejection)
    assert "Requested: 3, Available: 2" in refused.message


def test_a_sidecar_keeps_its_devices_beside_the_apps() -> None:
    # A restartable init container runs on beside everything after it: nothing reuses its
    # devices. max(sidecar + init, sidecar + app) = 3.
    pod = _device_pod(_pod(_gpus("app", 2), init=(_sidecar(1), _gpus("init", 2))))
    assert holds(pod) == {GPU: 3}
    refused = allocate(pod, {GPU: 2}, {})
    assert isinstance(refused, Rejection)
    assert "Requested: 2, Available: 1" in refused.message


def test_pods_are_taken_oldest_first_against_what_the_admitted_ones_hold() -> None:
    running = _device_pod(_pod(_gpus("c", 1), name="running", phase="Running"))
    newer = _device_pod(_pod(_gpus("c", 1), name="newer", created="2026-01-01T00:00:02Z"))
    older = _device_pod(_pod(_gpus("c", 1), name="older", created="2026-01-01T00:00:01Z"))
    decision = admit({GPU: 2}, [newer, running, older])
    assert [p.key for p in decision.admitted] == ["ml/older"]
    assert [(p.key, r.reason) for p, r in decision.rejected] == [
        ("ml/newer", "UnexpectedAdmissionError")
    ]
    # One admitted whose annotation the cache does not show yet holds its device too.
    decision = admit({GPU: 2}, [newer, older], admitted={older.uid})
    assert [p.key for p in decision.admitted] == ["ml/newer"]
    assert not decision.rejected


def test_what_admission_sees_of_a_pod() -> None:
    assert device_pod(_pod(_container("web"))) is None  # asks for no device
    assert device_pod(_pod(_gpus("c", 1), node=None)) is None  # not bound yet
    assert device_pod(_pod(_gpus("c", 1), phase="Failed")) is None  # refused, or done
    assert device_pod(_pod(_gpus("c", 1), phase="Succeeded")) is None
    assert not _device_pod(_pod(_gpus("c", 1))).admitted
    assert _device_pod(_pod(_gpus("c", 1), phase="Running")).admitted
    marked = _pod(_gpus("c", 1), annotations={ANNOTATION_ADMITTED: "true"})
    assert _device_pod(marked).admitted
    # An init container asking for a device is enough to need admission.
    assert device_pod(_pod(_container("app"), init=(_gpus("init", 1),))) is not None


def test_the_cache_trim_keeps_what_admission_reads() -> None:
    pods = [
        _pod(_gpus("app", 2), _container("log"), init=(_sidecar(1), _gpus("init", 3))),
        _pod(_gpus("c", 1), annotations={ANNOTATION_ADMITTED: "true", "other": "x"}),
        _pod(_gpus("c", 1, "nvidia.com/NVIDIA_H100_80GB_HBM3")),  # a GPU for a VM
    ]
    software = _pod(_gpus("c", 1))
    software["metadata"]["labels"] = {"app": "nvidia-dcgm"}  # node software asking for one
    for pod in [*pods, software]:
        assert device_pod(trim_pod(pod)) == device_pod(pod) is not None


def test_kwok_starts_a_pod_only_through_the_gate() -> None:
    stage = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "pod-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
                ]
            },
            "next": {"statusTemplate": "phase: Running\n"},
        },
    }
    gated = gate_pod_ready(stage)
    assert gated is not None
    assert gated["spec"]["selector"]["matchExpressions"] == [
        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
        {"jq": {"key": STAGE_GATE, "operator": "In", "values": ["none", "true"]}},
    ]
    assert gated["spec"]["next"] == stage["spec"]["next"]
    assert len(stage["spec"]["selector"]["matchExpressions"]) == 1  # the original untouched
    assert gate_pod_ready({**stage, "metadata": {"name": "pod-complete"}}) is None


def test_the_node_offers_what_its_running_device_plugin_advertises() -> None:
    node = node_info(node_manifest(gpu_node("n1", gpus=4), index=0))

    def pod(software: NodeSoftware) -> PodInfo:
        return PodInfo(key=f"gpu/{software.value}", node="n1", software=software, ready=True)

    stack = [pod(NodeSoftware.DRIVER), pod(NodeSoftware.DEVICE_PLUGIN)]
    assert plan_node(node, stack, now=0.0).offered == {GPU: "4"}
    # The driver gone (being replaced): the plugin has nothing to offer.
    assert plan_node(node, stack[1:], now=0.0).offered == {}
