"""What the simulated NVIDIA node software decides for one node, given the pods on it
(the pure model under `gpusim.gpu_node_behaviour`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from gpusim import cpu_node, gpu_node, node_manifest
from gpusim._node_model import MigProgress, Plan, Sharing, driver_version, plan_node, sharing_of
from gpusim._node_software import (
    ANNOTATION_MIG_APPLIED,
    ANNOTATION_MIG_FAILED,
    LABEL_MIG_CONFIG,
    LABEL_MIG_STATE,
    PAUSED_FOR_MIG,
    NodeInfo,
    NodeSoftware,
    PodInfo,
    gpu_workload_node,
    is_gfd_label,
    node_info,
    pod_info,
    software_of,
    trim_node,
    trim_pod,
)

pytestmark = pytest.mark.unit

APPS = {
    NodeSoftware.DRIVER: "nvidia-driver-daemonset",
    NodeSoftware.DEVICE_PLUGIN: "nvidia-device-plugin-daemonset",
    NodeSoftware.GPU_FEATURE_DISCOVERY: "gpu-feature-discovery",
    NodeSoftware.MIG_MANAGER: "nvidia-mig-manager",
    NodeSoftware.DCGM: "nvidia-dcgm",
    NodeSoftware.VFIO_MANAGER: "nvidia-vfio-manager",
    NodeSoftware.SANDBOX_DEVICE_PLUGIN: "nvidia-sandbox-device-plugin-daemonset",
}


def _pod_object(
    app: str,
    *,
    node: str = "n1",
    ready: bool = True,
    image: str = "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
    env: Mapping[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"{app}-x", "namespace": "gpu", "labels": {"app": app}}
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    container: dict[str, Any] = {"name": "c", "image": image}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "containers": [container]},
        "status": {
            "phase": "Running" if ready else "Pending",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(software: NodeSoftware, **kwargs: Any) -> PodInfo:
    info = pod_info(_pod_object(APPS[software], **kwargs))
    assert info is not None
    return info


def gpu(
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    resources: Mapping[str, str] | None = None,
    **spec: Any,
) -> NodeInfo:
    manifest = node_manifest(gpu_node("n1", **spec), index=0)
    manifest["metadata"]["labels"].update(labels or {})
    manifest["metadata"]["annotations"].update(annotations or {})
    for key in ("capacity", "allocatable"):
        manifest["status"][key].update(resources or {})
    return node_info(manifest)


def apply(node: NodeInfo, plan: Plan) -> NodeInfo:
    """The node after the loop wrote `plan` (merge-patch semantics)."""

    def merged(old: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
        result = dict(old)
        for key, value in changes.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = value
        return result

    return replace(
        node,
        labels=merged(node.labels, plan.labels),
        annotations=merged(node.annotations, plan.annotations),
        capacity=merged(node.capacity, plan.resources),
        allocatable=merged(node.allocatable, plan.resources),
    )


STACK = [pod(NodeSoftware.DRIVER), pod(NodeSoftware.DEVICE_PLUGIN)]


# -- which pods are which software ---------------------------------------------------


def test_software_table_matches_the_reference_app_labels() -> None:
    assert software_of({"app": "nvidia-device-plugin-daemonset"}) is NodeSoftware.DEVICE_PLUGIN
    assert software_of({"app": "gpu-feature-discovery"}) is NodeSoftware.GPU_FEATURE_DISCOVERY
    assert software_of({"app": "nvidia-mig-manager"}) is NodeSoftware.MIG_MANAGER
    assert software_of({"app": "nvidia-driver-daemonset"}) is NodeSoftware.DRIVER
    # Per-OS / per-kernel driver DaemonSets keep the prefix.
    assert software_of({"app": "nvidia-driver-daemonset-ubuntu22.04"}) is NodeSoftware.DRIVER
    assert software_of({"app.kubernetes.io/component": "nvidia-driver"}) is NodeSoftware.DRIVER
    assert software_of({"app": "nvidia-device-plugin-daemonset-extra"}) is None
    assert software_of({"app": "web"}) is None


def test_pod_info_reads_readiness_image_and_env() -> None:
    info = pod(NodeSoftware.DEVICE_PLUGIN, env={"MIG_STRATEGY": "mixed"})
    assert info.ready and info.node == "n1" and info.env == {"MIG_STRATEGY": "mixed"}
    assert not pod(NodeSoftware.DRIVER, ready=False).ready
    assert not pod(NodeSoftware.DRIVER, deleting=True).ready
    unbound = _pod_object("nvidia-driver-daemonset")
    del unbound["spec"]["nodeName"]
    assert pod_info(unbound) is None


def test_what_the_cache_keeps_reads_the_same() -> None:
    pod_object = _pod_object("nvidia-device-plugin-daemonset", env={"MIG_STRATEGY": "mixed"})
    pod_object["spec"]["containers"][0]["env"].append({"name": "FROM", "valueFrom": {}})
    pod_object["spec"]["volumes"] = [{"name": "big", "emptyDir": {}}]
    trimmed = trim_pod(pod_object)
    assert pod_info(trimmed) == pod_info(pod_object) is not None
    assert "volumes" not in trimmed["spec"]
    assert trim_pod(_pod_object("web"))["metadata"] == {"name": "web-x", "namespace": "gpu"}
    manifest = node_manifest(gpu_node("n1"), index=0)
    manifest["metadata"]["resourceVersion"] = "42"
    manifest["metadata"]["annotations"]["other/annotation"] = "x"
    manifest["status"] = {
        "capacity": {"cpu": "8", "nvidia.com/gpu": "8"},
        "images": [{"names": ["a"], "sizeBytes": 1}],
    }
    trimmed = trim_node(manifest)
    assert node_info(trimmed) == node_info(manifest)
    assert trimmed["status"] == {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {}}


def test_driver_version_comes_from_the_image_tag() -> None:
    assert driver_version("nvcr.io/nvidia/driver:580.95.05-ubuntu22.04") == "580.95.05"
    assert driver_version("nvcr.io/nvidia/driver:570.86.15-5.15.0-131-generic-ubuntu22.04") == (
        "570.86.15"
    )
    assert driver_version("nvcr.io/nvidia/driver@sha256:abcd") == "595.91.07"
    assert driver_version("localhost:5000/driver") == "595.91.07"


# -- device plugin -> resources -----------------------------------------------------------


def test_device_plugin_with_driver_advertises_every_gpu() -> None:
    plan = plan_node(gpu(gpus=4), STACK, now=0)
    assert plan.resources == {"nvidia.com/gpu": "4"}
    assert plan.labels == {} and plan.annotations == {}


def test_nothing_without_a_ready_driver() -> None:
    assert plan_node(gpu(), [pod(NodeSoftware.DEVICE_PLUGIN)], now=0).empty
    not_ready = [pod(NodeSoftware.DRIVER, ready=False), pod(NodeSoftware.DEVICE_PLUGIN)]
    assert plan_node(gpu(), not_ready, now=0).empty


def test_driver_gone_takes_the_resources_away() -> None:
    node = gpu(resources={"nvidia.com/gpu": "8"})
    assert plan_node(node, [pod(NodeSoftware.DEVICE_PLUGIN)], now=0).resources == {
        "nvidia.com/gpu": None
    }
    assert plan_node(node, [pod(NodeSoftware.DRIVER)], now=0).resources == {"nvidia.com/gpu": None}


def test_a_driver_restarted_with_the_same_digest_keeps_the_gpus_offered() -> None:
    # Restart-only (simulated): the modules the ready driver pod loaded stay loaded while
    # its replacement, installed with the same DRIVER_CONFIG_DIGEST, starts.
    digest = {"DRIVER_CONFIG_DIGEST": "abc"}
    node = gpu(resources={"nvidia.com/gpu": "8"})
    plugin = pod(NodeSoftware.DEVICE_PLUGIN)
    running = plan_node(node, [pod(NodeSoftware.DRIVER, env=digest), plugin], now=0)
    assert running.annotations == {"sim.gpu-operator.io/driver-loaded": "595.91.07 abc"}
    node = apply(node, running)
    old = pod(NodeSoftware.DRIVER, env=digest, deleting=True)
    new = pod(NodeSoftware.DRIVER, env=digest, ready=False)
    for restarting in ([old, plugin], [new, plugin], [old, new, plugin]):
        plan = plan_node(node, restarting, now=0)
        assert plan.empty and plan.offered == {"nvidia.com/gpu": "8"}
    # No driver pod for a moment: loaded while GPU workloads hold the GPUs, else unloaded.
    assert plan_node(node, [plugin], now=0, gpu_workloads=1).empty
    gone = plan_node(node, [plugin], now=0)
    assert gone.resources == {"nvidia.com/gpu": None}
    assert gone.annotations == {"sim.gpu-operator.io/driver-loaded": None}
    # Another install (another digest) unloads the driver: no GPU until it is ready.
    other = pod(NodeSoftware.DRIVER, env={"DRIVER_CONFIG_DIGEST": "def"}, ready=False)
    reinstall = plan_node(node, [other, plugin], now=0)
    assert reinstall.resources == {"nvidia.com/gpu": None} and reinstall.offered == {}


def test_a_driver_preinstalled_on_the_host_needs_no_driver_pod() -> None:
    plan = plan_node(gpu(host_driver="570.86.15"), [pod(NodeSoftware.DEVICE_PLUGIN)], now=0)
    assert plan.resources == {"nvidia.com/gpu": "8"}


def test_in_sync_node_needs_no_write() -> None:
    node = gpu(resources={"nvidia.com/gpu": "8"})
    assert plan_node(node, STACK, now=0).empty


# -- sandbox (VM) software -> the resources KubeVirt asks for --------------------------

VM_STACK = [pod(NodeSoftware.VFIO_MANAGER), pod(NodeSoftware.SANDBOX_DEVICE_PLUGIN)]


def test_passthrough_node_advertises_its_gpus_by_model_for_kubevirt() -> None:
    plan = plan_node(gpu(gpus=4, product="NVIDIA-H100-80GB-HBM3"), VM_STACK, now=0)
    assert plan.resources == {"nvidia.com/NVIDIA_H100_80GB_HBM3": "4"}
    l4 = plan_node(gpu(gpus=2, product="NVIDIA-L4"), VM_STACK, now=0)
    assert l4.resources == {"nvidia.com/NVIDIA_L4": "2"}


def test_moving_to_passthrough_swaps_nvidia_gpu_for_the_vm_resource() -> None:
    container_node = apply(gpu(gpus=4), plan_node(gpu(gpus=4), STACK, now=0))
    assert container_node.allocatable == {"nvidia.com/gpu": "4"}
    plan = plan_node(container_node, VM_STACK, now=0)
    assert plan.resources == {"nvidia.com/gpu": None, "nvidia.com/NVIDIA_H100_80GB_HBM3": "4"}
    assert plan_node(apply(container_node, plan), VM_STACK, now=0).empty


def test_no_vm_resource_before_vfio_binds_or_while_a_driver_holds_the_gpus() -> None:
    assert plan_node(gpu(), [pod(NodeSoftware.SANDBOX_DEVICE_PLUGIN)], now=0).empty
    binding = [pod(NodeSoftware.VFIO_MANAGER, ready=False), pod(NodeSoftware.SANDBOX_DEVICE_PLUGIN)]
    assert plan_node(gpu(), binding, now=0).empty
    assert plan_node(gpu(), [*VM_STACK, pod(NodeSoftware.DRIVER)], now=0).empty


def test_cpu_nodes_are_never_touched() -> None:
    node = node_info(node_manifest(cpu_node("c1"), 0))
    assert plan_node(
        node, [pod(NodeSoftware.DRIVER, node="c1"), pod(NodeSoftware.DEVICE_PLUGIN)], now=0
    ).empty


# -- GPU feature discovery ----------------------------------------------------------------


def test_gfd_labels() -> None:
    pods = [pod(NodeSoftware.DRIVER, image="nvcr.io/nvidia/driver:580.95.05-rhel9.4")]
    pods.append(pod(NodeSoftware.GPU_FEATURE_DISCOVERY))
    labels = plan_node(gpu(gpus=8, product="NVIDIA-A100-SXM4-80GB"), pods, now=0).labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "81920"
    assert labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["nvidia.com/gpu.compute.major"] == "8"
    assert labels["nvidia.com/cuda.driver.major"] == "580"
    assert labels["nvidia.com/cuda.driver.minor"] == "95"
    assert labels["nvidia.com/cuda.driver.rev"] == "05"
    assert labels["nvidia.com/mig.capable"] == "false"
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert all(is_gfd_label(key) for key in labels)


def test_gfd_labels_stay_when_gfd_stops_and_never_touch_operator_labels() -> None:
    pods = [pod(NodeSoftware.DRIVER), pod(NodeSoftware.GPU_FEATURE_DISCOVERY)]
    operator = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true"}
    node = gpu(labels=operator)
    node = apply(node, plan_node(node, pods, now=0))
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert plan_node(node, [pod(NodeSoftware.DRIVER)], now=0).empty
    for key in operator:
        assert not is_gfd_label(key)
    assert not is_gfd_label(LABEL_MIG_CONFIG) and not is_gfd_label(LABEL_MIG_STATE)


# -- MIG manager --------------------------------------------------------------------------


def _mig_node(**labels: str) -> NodeInfo:
    return gpu(gpus=2, mig_capable=True, labels={LABEL_MIG_CONFIG: "all-1g.10gb", **labels})


def _run_mig(
    node: NodeInfo, pods: list[PodInfo], *, seconds: float = 1.0
) -> tuple[NodeInfo, list[str]]:
    """Drive the MIG manager to its end, as the loop does; returns the states it wrote."""
    states: list[str] = []
    progress: MigProgress | None = None
    now = 0.0
    for _ in range(10):
        plan = plan_node(node, pods, now=now, mig=progress, mig_reconfigure_seconds=seconds)
        node = apply(node, plan)
        state = plan.labels.get(LABEL_MIG_STATE)
        if state:
            states.append(state)
        progress = plan.mig
        if plan.recheck_after is None and progress is None:
            break
        now += plan.recheck_after or 0.0
    return node, states


MIG_STACK = [
    pod(NodeSoftware.DRIVER),
    pod(NodeSoftware.DEVICE_PLUGIN, env={"MIG_STRATEGY": "mixed"}),
    pod(NodeSoftware.MIG_MANAGER),
]


def test_mig_mixed_goes_pending_then_success_with_mig_resources() -> None:
    node, states = _run_mig(_mig_node(), MIG_STACK)
    assert states == ["pending", "success"]
    assert node.annotations[ANNOTATION_MIG_APPLIED] == "all-1g.10gb"
    assert node.allocatable == {"nvidia.com/mig-1g.10gb": "14"}
    assert node.capacity == node.allocatable


def test_mig_waits_for_its_delay_before_success() -> None:
    node = _mig_node()
    first = plan_node(node, MIG_STACK, now=10.0, mig_reconfigure_seconds=2.0)
    assert first.labels[LABEL_MIG_STATE] == "pending" and first.recheck_after == 2.0
    node = apply(node, first)
    early = plan_node(node, MIG_STACK, now=11.0, mig=first.mig, mig_reconfigure_seconds=2.0)
    assert early.labels == {} and early.recheck_after == pytest.approx(1.0)
    done = plan_node(node, MIG_STACK, now=12.0, mig=first.mig, mig_reconfigure_seconds=2.0)
    assert done.labels[LABEL_MIG_STATE] == "success"


def test_mig_single_strategy_multiplies_nvidia_gpu() -> None:
    pods = [
        pod(NodeSoftware.DRIVER),
        pod(NodeSoftware.DEVICE_PLUGIN, env={"MIG_STRATEGY": "single"}),
        pod(NodeSoftware.MIG_MANAGER),
        pod(NodeSoftware.GPU_FEATURE_DISCOVERY, env={"MIG_STRATEGY": "single"}),
    ]
    node, _ = _run_mig(_mig_node(), pods)
    assert node.allocatable == {"nvidia.com/gpu": "14"}
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"
    assert node.labels["nvidia.com/gpu.count"] == "14"
    assert node.labels["nvidia.com/gpu.memory"] == "10240"
    assert node.labels["nvidia.com/mig.capable"] == "true"


def test_mig_strategy_may_come_from_the_node_label() -> None:
    pods = [
        pod(NodeSoftware.DRIVER),
        pod(NodeSoftware.DEVICE_PLUGIN),
        pod(NodeSoftware.MIG_MANAGER),
    ]
    node, _ = _run_mig(_mig_node(**{"nvidia.com/mig.strategy": "mixed"}), pods)
    assert node.allocatable == {"nvidia.com/mig-1g.10gb": "14"}


def test_mig_mixed_gfd_labels_per_profile_and_cleanup_when_disabled() -> None:
    pods = [*MIG_STACK, pod(NodeSoftware.GPU_FEATURE_DISCOVERY, env={"MIG_STRATEGY": "mixed"})]
    node, _ = _run_mig(_mig_node(**{LABEL_MIG_CONFIG: "all-balanced"}), pods)
    assert node.allocatable == {
        "nvidia.com/mig-1g.10gb": "4",
        "nvidia.com/mig-2g.20gb": "2",
        "nvidia.com/mig-3g.40gb": "2",
    }
    assert node.labels["nvidia.com/mig-1g.10gb.count"] == "4"
    assert node.labels["nvidia.com/mig-3g.40gb.memory"] == "40960"

    node = apply(node, Plan(labels={LABEL_MIG_CONFIG: "all-disabled"}))
    node, states = _run_mig(node, pods)
    assert states == ["pending", "success"]
    assert node.allocatable == {"nvidia.com/gpu": "2"}
    assert not any(key.startswith("nvidia.com/mig-") for key in node.labels)


def test_mig_config_the_gpu_cannot_apply_fails_and_keeps_the_layout() -> None:
    node, _ = _run_mig(_mig_node(), MIG_STACK)
    node = apply(node, Plan(labels={LABEL_MIG_CONFIG: "all-1g.5gb"}))
    node, states = _run_mig(node, MIG_STACK)
    assert states == ["pending", "failed"]
    assert node.annotations[ANNOTATION_MIG_FAILED] == "all-1g.5gb"
    assert node.annotations[ANNOTATION_MIG_APPLIED] == "all-1g.10gb"
    assert node.allocatable == {"nvidia.com/mig-1g.10gb": "14"}
    # It stays failed (no retry loop) until someone asks for another config.
    assert plan_node(node, MIG_STACK, now=100.0).empty


def test_a_node_that_is_not_mig_capable_fails_any_mig_layout() -> None:
    node = gpu(gpus=2, mig_capable=False, labels={LABEL_MIG_CONFIG: "all-1g.10gb"})
    node, states = _run_mig(node, MIG_STACK)
    assert states == ["pending", "failed"]
    assert node.allocatable == {"nvidia.com/gpu": "2"}


def test_mig_manager_needs_its_pod_and_the_driver() -> None:
    assert plan_node(_mig_node(), [pod(NodeSoftware.DRIVER)], now=0).empty
    assert plan_node(_mig_node(), [pod(NodeSoftware.MIG_MANAGER)], now=0).empty


def test_mig_manager_pauses_gpu_clients_until_their_pods_are_gone() -> None:
    deploy = "nvidia.com/gpu.deploy.device-plugin"
    node = _mig_node(**{deploy: "true", "nvidia.com/gpu.deploy.dcgm": "true"})
    pods = [*MIG_STACK, pod(NodeSoftware.DCGM)]
    first = plan_node(node, pods, now=0.0, mig_reconfigure_seconds=0.0)
    assert first.labels[deploy] == PAUSED_FOR_MIG
    assert first.labels["nvidia.com/gpu.deploy.dcgm"] == PAUSED_FOR_MIG
    node = apply(node, first)
    # The device plugin and DCGM pods are still on the node: keep waiting.
    waiting = plan_node(node, pods, now=5.0, mig=first.mig, mig_reconfigure_seconds=0.0)
    assert waiting.labels == {} and waiting.mig == first.mig
    # Their DaemonSets removed them: apply, then resume the clients.
    gone = [pod(NodeSoftware.DRIVER), pod(NodeSoftware.MIG_MANAGER)]
    done = plan_node(node, gone, now=6.0, mig=first.mig, mig_reconfigure_seconds=0.0)
    assert done.labels == {
        LABEL_MIG_STATE: "success",
        deploy: "true",
        "nvidia.com/gpu.deploy.dcgm": "true",
    }


def test_a_layout_already_in_place_is_success_without_pending_or_pause() -> None:
    # The real MIG manager asserts the layout first and never says `pending` for it: the
    # operator reads `pending` as "a change that needs the GPUs idle".
    deploy = "nvidia.com/gpu.deploy.device-plugin"
    node = _mig_node(**{deploy: "true"})
    node = apply(node, Plan(annotations={ANNOTATION_MIG_APPLIED: "all-1g.10gb"}))
    plan = plan_node(node, MIG_STACK, now=0.0, gpu_workloads=1)
    assert plan.labels == {LABEL_MIG_STATE: "success"}
    assert plan.mig is None and plan.recheck_after is None


def test_a_mig_change_waits_pending_while_a_workload_holds_the_gpus() -> None:
    node = _mig_node()
    first = plan_node(node, MIG_STACK, now=0.0, mig_reconfigure_seconds=1.0, gpu_workloads=1)
    assert first.labels[LABEL_MIG_STATE] == "pending"
    node = apply(node, first)
    # Long past the delay, a workload pod still holds a GPU: still pending, no write, and no
    # timed recheck (the pod's deletion is what requeues).
    held = plan_node(node, MIG_STACK, now=60.0, mig=first.mig, gpu_workloads=1)
    assert held.empty and held.mig == first.mig and held.recheck_after is None
    done = plan_node(node, MIG_STACK, now=61.0, mig=first.mig, gpu_workloads=0)
    assert done.labels[LABEL_MIG_STATE] == "success"


def _workload(
    node: str | None = "n1", *, phase: str = "Running", gpu: bool = True
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"} if gpu else {"cpu": "1"}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits}}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "metadata": {"name": "train-0", "namespace": "ml", "labels": {"app": "train"}},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_a_gpu_workload_is_known_by_its_gpu_request_and_survives_the_trim() -> None:
    assert gpu_workload_node(_workload()) == "n1"
    assert gpu_workload_node(trim_pod(_workload())) == "n1"
    assert "volumes" not in trim_pod(_workload())["spec"]
    deleting = _workload()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert gpu_workload_node(trim_pod(deleting)) == "n1"  # it holds the GPU until gone
    assert gpu_workload_node(_workload(phase="Succeeded")) is None
    assert gpu_workload_node(_workload(gpu=False)) is None
    assert gpu_workload_node(_workload(node=None)) is None
    # Node software is never a workload, even when it asks for a GPU.
    software = _pod_object("nvidia-dcgm")
    software["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    assert gpu_workload_node(software) is None


# -- GPU sharing (MPS, time-slicing) -------------------------------------------------------

MPS_CONFIG = """
version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""


def test_a_sharing_config_is_read_as_the_device_plugin_reads_it() -> None:
    assert sharing_of(MPS_CONFIG) == Sharing("mps", 4)
    renamed = MPS_CONFIG.replace("mps:", "timeSlicing:\n    renameByDefault: true")
    assert sharing_of(renamed) == Sharing("time-slicing", 4, "nvidia.com/gpu.shared")
    for text in (None, "", "version: v1\n", "{{ not yaml", "sharing: {mps: {resources: 3}}"):
        assert sharing_of(text) is None


def test_mps_advertises_replicas_once_its_control_daemon_runs() -> None:
    node = gpu(gpus=2)
    stack = [pod(NodeSoftware.DRIVER), pod(NodeSoftware.DEVICE_PLUGIN)]
    # The plugin waits for the node's MPS control daemon: nothing to hand out meanwhile.
    waiting = plan_node(node, stack, now=0, plugin_config=MPS_CONFIG)
    assert apply(node, waiting).allocatable == {}
    daemon = _pod_object("nvidia-device-plugin-mps-control-daemon")
    serving = [*stack, pod_info(daemon), pod(NodeSoftware.GPU_FEATURE_DISCOVERY)]
    node = apply(node, plan_node(node, [p for p in serving if p], now=0, plugin_config=MPS_CONFIG))
    assert node.allocatable == {"nvidia.com/gpu": "8"}
    assert node.labels["nvidia.com/gpu.replicas"] == "4"
    assert node.labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    # Back to a plain config: whole GPUs again.
    plain = plan_node(node, [p for p in serving if p], now=0, plugin_config="version: v1\n")
    node = apply(node, plain)
    assert node.allocatable == {"nvidia.com/gpu": "2"}
    assert node.labels["nvidia.com/gpu.sharing-strategy"] == "none"


def test_the_device_plugin_pod_keeps_its_config_maps_through_the_trim() -> None:
    plugin = _pod_object("nvidia-device-plugin-daemonset")
    plugin["spec"]["volumes"] = [
        {"name": "configs", "configMap": {"name": "plugin-configs"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    info = pod_info(trim_pod(plugin))
    assert info is not None and info.config_maps == ("gpu/plugin-configs",)
    assert info == pod_info(plugin)
