"""The whole desired state for a cluster of GPU nodes on two OS releases and two kernels,
object by object, and what every object carries so the controller can own it."""

from __future__ import annotations

from typing import Any

import pytest

from components.operands import OPERANDS, Rendered

from .cases import (
    NAMESPACE,
    OWNER,
    container,
    daemonsets,
    init_container,
    operand,
    pod,
    policy,
    view,
)

pytestmark = pytest.mark.unit

CLUSTER_SCOPED = {"RuntimeClass", "ClusterRole", "ClusterRoleBinding"}

EXPECTED: dict[str, set[tuple[str, str]]] = {
    "pre-requisites": {
        ("RuntimeClass", "nvidia"),
        ("RuntimeClass", "nvidia-cdi"),
        ("RuntimeClass", "nvidia-legacy"),
    },
    "state-driver": {
        ("ServiceAccount", "nvidia-driver"),
        ("ClusterRole", "nvidia-driver"),
        ("ClusterRoleBinding", "nvidia-driver"),
        ("ConfigMap", "nvidia-driver-startup-probe"),
        ("DaemonSet", "nvidia-driver-daemonset-ubuntu22.04"),
        ("DaemonSet", "nvidia-driver-daemonset-rhel9.4"),
    },
    "state-container-toolkit": {
        ("ServiceAccount", "nvidia-container-toolkit"),
        ("Role", "nvidia-container-toolkit"),
        ("RoleBinding", "nvidia-container-toolkit"),
        ("ConfigMap", "nvidia-container-toolkit-entrypoint"),
        ("DaemonSet", "nvidia-container-toolkit-daemonset"),
    },
    "state-operator-validation": {
        ("ServiceAccount", "nvidia-operator-validator"),
        ("Role", "nvidia-operator-validator"),
        ("RoleBinding", "nvidia-operator-validator"),
        ("ClusterRole", "nvidia-operator-validator"),
        ("ClusterRoleBinding", "nvidia-operator-validator"),
        ("DaemonSet", "nvidia-operator-validator"),
    },
    "state-device-plugin": {
        ("ServiceAccount", "nvidia-device-plugin"),
        ("ClusterRole", "nvidia-device-plugin"),
        ("ClusterRoleBinding", "nvidia-device-plugin"),
        ("ConfigMap", "nvidia-device-plugin-entrypoint"),
        ("DaemonSet", "nvidia-device-plugin-daemonset"),
    },
    "state-dcgm": {
        ("ServiceAccount", "nvidia-dcgm"),
        ("Service", "nvidia-dcgm"),
        ("DaemonSet", "nvidia-dcgm"),
    },
    "state-dcgm-exporter": {
        ("ServiceAccount", "nvidia-dcgm-exporter"),
        ("Role", "nvidia-dcgm-exporter"),
        ("RoleBinding", "nvidia-dcgm-exporter"),
        ("ClusterRole", "nvidia-dcgm-exporter-read-pods"),
        ("ClusterRoleBinding", "nvidia-dcgm-exporter-read-pods"),
        ("Service", "nvidia-dcgm-exporter"),
        ("DaemonSet", "nvidia-dcgm-exporter"),
    },
    "gpu-feature-discovery": {
        ("ServiceAccount", "nvidia-gpu-feature-discovery"),
        ("Role", "nvidia-gpu-feature-discovery"),
        ("RoleBinding", "nvidia-gpu-feature-discovery"),
        ("ClusterRole", "nvidia-gpu-feature-discovery"),
        ("ClusterRoleBinding", "nvidia-gpu-feature-discovery"),
        ("DaemonSet", "gpu-feature-discovery"),
    },
    "state-mig-manager": {
        ("ServiceAccount", "nvidia-mig-manager"),
        ("Role", "nvidia-mig-manager"),
        ("RoleBinding", "nvidia-mig-manager"),
        ("ClusterRole", "nvidia-mig-manager"),
        ("ClusterRoleBinding", "nvidia-mig-manager"),
        ("ConfigMap", "default-mig-parted-config"),
        ("ConfigMap", "default-gpu-clients"),
        ("DaemonSet", "nvidia-mig-manager"),
    },
    "state-node-status-exporter": set(),  # off by default
}

VALIDATOR = "nvcr.io/nvidia/gpu-operator:v26.7.0"

# DaemonSet -> (pod `app` label, deploy label it selects on, main container, its image)
DAEMONSETS: dict[str, tuple[str, str, str, str]] = {
    "nvidia-driver-daemonset-ubuntu22.04": (
        "nvidia-driver-daemonset",
        "nvidia.com/gpu.deploy.driver",
        "nvidia-driver-ctr",
        "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04",
    ),
    "nvidia-driver-daemonset-rhel9.4": (
        "nvidia-driver-daemonset",
        "nvidia.com/gpu.deploy.driver",
        "nvidia-driver-ctr",
        "nvcr.io/nvidia/driver:595.91.07-rhel9",
    ),
    "nvidia-container-toolkit-daemonset": (
        "nvidia-container-toolkit-daemonset",
        "nvidia.com/gpu.deploy.container-toolkit",
        "nvidia-container-toolkit-ctr",
        "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
    ),
    "nvidia-operator-validator": (
        "nvidia-operator-validator",
        "nvidia.com/gpu.deploy.operator-validator",
        "nvidia-operator-validator",
        VALIDATOR,
    ),
    "nvidia-device-plugin-daemonset": (
        "nvidia-device-plugin-daemonset",
        "nvidia.com/gpu.deploy.device-plugin",
        "nvidia-device-plugin",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
    ),
    "nvidia-dcgm": (
        "nvidia-dcgm",
        "nvidia.com/gpu.deploy.dcgm",
        "nvidia-dcgm-ctr",
        "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
    ),
    "nvidia-dcgm-exporter": (
        "nvidia-dcgm-exporter",
        "nvidia.com/gpu.deploy.dcgm-exporter",
        "nvidia-dcgm-exporter",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
    ),
    "gpu-feature-discovery": (
        "gpu-feature-discovery",
        "nvidia.com/gpu.deploy.gpu-feature-discovery",
        "gpu-feature-discovery",
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
    ),
    "nvidia-mig-manager": (
        "nvidia-mig-manager",
        "nvidia.com/gpu.deploy.mig-manager",
        "nvidia-mig-manager",
        "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
    ),
}

# DaemonSet -> the validation file its init container waits for
WAITS_FOR = {
    "nvidia-device-plugin-daemonset": "toolkit-ready",
    "nvidia-dcgm": "toolkit-ready",
    "nvidia-dcgm-exporter": "toolkit-ready",
    "gpu-feature-discovery": "toolkit-ready",
    "nvidia-mig-manager": "toolkit-ready",
}


def render_all() -> dict[str, Rendered]:
    p, v = policy(), view()
    return {op.name: op.render(p, v) for op in OPERANDS if op.enabled(p)}


def test_operands_are_in_the_reference_order() -> None:
    assert [op.name for op in OPERANDS] == [
        "pre-requisites",
        "state-operator-metrics",
        "state-driver",
        "state-container-toolkit",
        "state-operator-validation",
        "state-device-plugin",
        "state-mps-control-daemon",
        "state-dcgm",
        "state-dcgm-exporter",
        "gpu-feature-discovery",
        "state-mig-manager",
        "state-node-status-exporter",
        "state-node-agent",  # ours, after the reference's
        "state-vgpu-manager",
        "state-vgpu-device-manager",
        "state-sandbox-validation",
        "state-vfio-manager",
        "state-sandbox-device-plugin",
        "state-kata-manager",
        "state-cc-manager",
    ]
    assert [op.deploy_label for op in OPERANDS][2:] == [
        "nvidia.com/gpu.deploy.driver",
        "nvidia.com/gpu.deploy.container-toolkit",
        "nvidia.com/gpu.deploy.operator-validator",
        "nvidia.com/gpu.deploy.device-plugin",
        "nvidia.com/gpu.deploy.device-plugin",  # the MPS daemon runs with the plugin
        "nvidia.com/gpu.deploy.dcgm",
        "nvidia.com/gpu.deploy.dcgm-exporter",
        "nvidia.com/gpu.deploy.gpu-feature-discovery",
        "nvidia.com/gpu.deploy.mig-manager",
        "nvidia.com/gpu.deploy.node-status-exporter",
        "nvidia.com/gpu.deploy.node-agent",
        "nvidia.com/gpu.deploy.vgpu-manager",
        "nvidia.com/gpu.deploy.vgpu-device-manager",
        "nvidia.com/gpu.deploy.sandbox-validator",
        "nvidia.com/gpu.deploy.vfio-manager",
        "nvidia.com/gpu.deploy.sandbox-device-plugin",
        "nvidia.com/gpu.deploy.kata-manager",
        "nvidia.com/gpu.deploy.cc-manager",
    ]
    assert operand("pre-requisites").deploy_label is None
    assert operand("state-operator-metrics").deploy_label is None


def test_every_operand_renders_exactly_its_objects() -> None:
    rendered = render_all()
    got = {
        name: {(o["kind"], o["metadata"]["name"]) for o in r.objects}
        for name, r in rendered.items()
    }
    expected = {name: objs for name, objs in EXPECTED.items() if objs}
    assert got == expected
    assert all(not r.conditions for r in rendered.values())


def test_every_object_is_owned_labelled_and_in_the_operator_namespace() -> None:
    for name, rendered in render_all().items():
        for obj in rendered.objects:
            meta = obj["metadata"]
            assert obj["apiVersion"] and obj["kind"]
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpu-operator"
            assert meta["labels"]["nvidia.com/gpu-operator.component"] == name
            assert meta["ownerReferences"] == [dict(OWNER)]
            if obj["kind"] in CLUSTER_SCOPED:
                assert "namespace" not in meta
            else:
                assert meta["namespace"] == NAMESPACE


def test_bindings_give_roles_to_the_operand_service_account_in_the_namespace() -> None:
    for rendered in render_all().values():
        accounts = {
            o["metadata"]["name"] for o in rendered.objects if o["kind"] == "ServiceAccount"
        }
        for obj in rendered.objects:
            if obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
                (subject,) = obj["subjects"]
                assert subject["namespace"] == NAMESPACE
                assert subject["name"] in accounts
                role_kind = "Role" if obj["kind"] == "RoleBinding" else "ClusterRole"
                assert (role_kind, obj["roleRef"]["name"]) in {
                    (o["kind"], o["metadata"]["name"]) for o in rendered.objects
                }


@pytest.mark.parametrize("ds_name", sorted(DAEMONSETS))
def test_each_daemonset_as_an_admin_sees_it(ds_name: str) -> None:
    app, deploy, main, image = DAEMONSETS[ds_name]
    all_ds: dict[str, Any] = {}
    for rendered in render_all().values():
        all_ds.update(daemonsets(rendered))
    ds = all_ds[ds_name]
    template = ds["spec"]["template"]
    assert ds["spec"]["selector"]["matchLabels"]["app"] == app
    assert template["metadata"]["labels"]["app"] == app
    for key, value in ds["spec"]["selector"]["matchLabels"].items():
        assert template["metadata"]["labels"][key] == value
    assert template["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-operator"
    assert pod(ds)["nodeSelector"][deploy] == "true"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod(ds)[
        "tolerations"
    ]
    assert pod(ds)["priorityClassName"] == "system-node-critical"
    account = pod(ds)["serviceAccountName"]
    assert account.startswith("nvidia-")
    ctr = container(ds)
    assert (ctr["name"], ctr["image"]) == (main, image)
    assert ctr["imagePullPolicy"] == "IfNotPresent"
    expected_strategy = "OnDelete" if ds_name.startswith("nvidia-driver") else "RollingUpdate"
    assert ds["spec"]["updateStrategy"]["type"] == expected_strategy
    if expected_strategy == "RollingUpdate":
        assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1}
    if ds_name in WAITS_FOR:
        wait = init_container(ds, "toolkit-validation")
        assert f"/run/nvidia/validations/{WAITS_FOR[ds_name]}" in wait["args"][0]
        assert wait["image"] == VALIDATOR


def test_all_containers_and_init_containers_have_images_from_the_policy() -> None:
    for rendered in render_all().values():
        for ds in daemonsets(rendered).values():
            for ctr in pod(ds)["containers"] + pod(ds).get("initContainers", []):
                assert ctr["image"].startswith("nvcr.io/nvidia/"), (ds["metadata"]["name"], ctr)
            for vol in pod(ds)["volumes"]:
                if "configMap" in vol:
                    assert vol["configMap"]["name"]


def test_volumes_mounted_by_containers_exist() -> None:
    for rendered in render_all().values():
        for ds in daemonsets(rendered).values():
            names = {v["name"] for v in pod(ds)["volumes"]}
            for ctr in pod(ds)["containers"] + pod(ds).get("initContainers", []):
                for m in ctr.get("volumeMounts", []):
                    assert m["name"] in names, (ds["metadata"]["name"], ctr["name"], m)


def test_rendering_is_deterministic() -> None:
    assert render_all() == render_all()


def test_gpu_node_from_a_node_object() -> None:
    from components.operands import GPUNode

    node = GPUNode.from_node(
        {
            "metadata": {
                "name": "gpu-1",
                "labels": {
                    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
                    "feature.node.kubernetes.io/kernel-version.full": "6.8.0-60-generic",
                    "nvidia.com/mig.capable": "true",
                },
            },
            "status": {"nodeInfo": {"containerRuntimeVersion": "containerd://2.1.4"}},
        }
    )
    assert (node.name, node.os_id, node.os_version, node.kernel) == (
        "gpu-1",
        "ubuntu",
        "24.04",
        "6.8.0-60-generic",
    )
    assert node.container_runtime == "containerd://2.1.4"
    assert node.mig_capable is True
    bare = GPUNode.from_node({"metadata": {"name": "x"}})
    assert (bare.os_id, bare.kernel, bare.mig_capable, bare.container_runtime) == (
        None,
        None,
        False,
        "",
    )
