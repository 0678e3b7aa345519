"""The sandbox (VM) operands: each rendered object by object, on an Ubuntu and a RHEL
cluster, and what the policy changes in them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from components.operands import (
    CCManager,
    Driver,
    GPUNode,
    KataManager,
    MIGManager,
    Rendered,
    SandboxDevicePlugin,
    SandboxValidator,
    VFIOManager,
    VGPUDeviceManager,
    VGPUManager,
)
from tests.unit.components.api.cases import REPO

from .cases import (
    NAMESPACE,
    OWNER,
    RHEL_KERNEL,
    container,
    daemonsets,
    env_of,
    find,
    gpu_node,
    init_container,
    kinds_and_names,
    pod,
    policy,
    view,
    volumes,
)

pytestmark = pytest.mark.unit

DEPLOY = "nvidia.com/gpu.deploy."
#: Everything switched on, with what the vGPU operands need named.
ALL_ON: Mapping[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"},
    "vgpuManager": {"enabled": True, "repository": "registry.example/nvidia", "version": "595.58"},
    "vgpuDeviceManager": {"config": {"name": "vgpu-devices", "default": "A100-4C"}},
    "kataManager": {"enabled": True},
    "ccManager": {"enabled": True, "defaultMode": "on"},
}


def vm_nodes(os_id: str, os_version: str, kernel: str) -> list[GPUNode]:
    """One passthrough and one vGPU node of one OS, labelled as the node labeller does."""
    passthrough = {DEPLOY + k: "true" for k in ("vfio-manager", "sandbox-device-plugin")}
    vgpu = {DEPLOY + k: "true" for k in ("vgpu-manager", "vgpu-device-manager")}
    return [
        gpu_node("vm-1", os_id, os_version, kernel, labels=passthrough),
        gpu_node("vm-2", os_id, os_version, kernel, labels=vgpu),
    ]


OS_FAMILIES = {
    "ubuntu": (vm_nodes("ubuntu", "22.04", "5.15.0-105-generic"), "ubuntu22.04"),
    "rhel": (vm_nodes("rhel", "9.4", RHEL_KERNEL), "rhel9"),
}

#: state -> (operand, DaemonSet = pod `app` label, deploy label, the objects it renders)
EXPECTED: Mapping[str, tuple[Any, str, str, set[tuple[str, str]]]] = {
    "state-vfio-manager": (
        VFIOManager(),
        "nvidia-vfio-manager",
        "vfio-manager",
        {
            ("ServiceAccount", "nvidia-vfio-manager"),
            ("ClusterRole", "nvidia-vfio-manager"),
            ("ClusterRoleBinding", "nvidia-vfio-manager"),
            ("DaemonSet", "nvidia-vfio-manager"),
        },
    ),
    "state-sandbox-device-plugin": (
        SandboxDevicePlugin(),
        "nvidia-sandbox-device-plugin-daemonset",
        "sandbox-device-plugin",
        {
            ("ServiceAccount", "nvidia-sandbox-device-plugin"),
            ("DaemonSet", "nvidia-sandbox-device-plugin-daemonset"),
        },
    ),
    "state-sandbox-validation": (
        SandboxValidator(),
        "nvidia-sandbox-validator",
        "sandbox-validator",
        {
            ("ServiceAccount", "nvidia-sandbox-validator"),
            ("ClusterRole", "nvidia-sandbox-validator"),
            ("ClusterRoleBinding", "nvidia-sandbox-validator"),
            ("DaemonSet", "nvidia-sandbox-validator"),
        },
    ),
    "state-vgpu-manager": (
        VGPUManager(),
        "nvidia-vgpu-manager-daemonset",
        "vgpu-manager",
        {
            ("ServiceAccount", "nvidia-vgpu-manager"),
            ("ClusterRole", "nvidia-vgpu-manager"),
            ("ClusterRoleBinding", "nvidia-vgpu-manager"),
            ("DaemonSet", "nvidia-vgpu-manager-daemonset"),
        },
    ),
    "state-vgpu-device-manager": (
        VGPUDeviceManager(),
        "nvidia-vgpu-device-manager",
        "vgpu-device-manager",
        {
            ("ServiceAccount", "nvidia-vgpu-device-manager"),
            ("Role", "nvidia-vgpu-device-manager"),
            ("RoleBinding", "nvidia-vgpu-device-manager"),
            ("ClusterRole", "nvidia-vgpu-device-manager"),
            ("ClusterRoleBinding", "nvidia-vgpu-device-manager"),
            ("DaemonSet", "nvidia-vgpu-device-manager"),
        },
    ),
    "state-kata-manager": (
        KataManager(),
        "nvidia-kata-manager",
        "kata-manager",
        {
            ("ServiceAccount", "nvidia-kata-manager"),
            ("Role", "nvidia-kata-manager"),
            ("RoleBinding", "nvidia-kata-manager"),
            ("ClusterRole", "nvidia-kata-manager"),
            ("ClusterRoleBinding", "nvidia-kata-manager"),
            ("ConfigMap", "nvidia-kata-manager-config"),
            ("ConfigMap", "nvidia-kata-manager-entrypoint"),
            ("DaemonSet", "nvidia-kata-manager"),
        },
    ),
    "state-cc-manager": (
        CCManager(),
        "nvidia-cc-manager",
        "cc-manager",
        {
            ("ServiceAccount", "nvidia-cc-manager"),
            ("Role", "nvidia-cc-manager"),
            ("RoleBinding", "nvidia-cc-manager"),
            ("ClusterRole", "nvidia-cc-manager"),
            ("ClusterRoleBinding", "nvidia-cc-manager"),
            ("DaemonSet", "nvidia-cc-manager"),
        },
    ),
}


def render(op: Any, spec: Mapping[str, Any], nodes: Sequence[GPUNode]) -> Rendered:
    rendered: Rendered = op.render(policy(spec), view(nodes))
    return rendered


@pytest.mark.parametrize("family", sorted(OS_FAMILIES))
@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_each_operand_renders_exactly_its_objects(state: str, family: str) -> None:
    op, app, deploy, objects = EXPECTED[state]
    nodes, _ = OS_FAMILIES[family]
    rendered = render(op, ALL_ON, nodes)
    assert op.name == state and op.deploy_label == DEPLOY + deploy
    assert rendered.conditions == []
    assert kinds_and_names(rendered) == objects
    for obj in rendered.objects:
        meta = obj["metadata"]
        assert meta["labels"]["nvidia.com/gpu-operator.component"] == state
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpu-operator"
        assert meta["ownerReferences"] == [dict(OWNER)]
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert meta["namespace"] == NAMESPACE
    ds = daemonsets(rendered)[app]
    template = ds["spec"]["template"]
    assert ds["spec"]["selector"]["matchLabels"]["app"] == app
    assert template["metadata"]["labels"]["app"] == app
    assert pod(ds)["nodeSelector"][DEPLOY + deploy] == "true"
    assert pod(ds)["serviceAccountName"] == f"nvidia-{deploy}"
    assert pod(ds)["priorityClassName"] == "system-node-critical"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod(ds)[
        "tolerations"
    ]
    # Every volume a container mounts exists in the pod.
    names = set(volumes(ds))
    for ctr in pod(ds)["containers"] + pod(ds).get("initContainers", []):
        assert {m["name"] for m in ctr.get("volumeMounts", [])} <= names, ctr["name"]


@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_nothing_without_the_policy_asking(state: str) -> None:
    """The default policy deploys no VM operand; with sandbox workloads off the VM
    managers stay off even when their own section says enabled."""
    op = EXPECTED[state][0]
    nodes = OS_FAMILIES["ubuntu"][0]
    assert op.enabled(policy({})) is False
    assert render(op, {}, nodes) == Rendered()
    if state != "state-cc-manager":
        off = {**ALL_ON, "sandboxWorkloads": {"enabled": False}}
        assert op.enabled(policy(off)) is False


@pytest.mark.parametrize("family", sorted(OS_FAMILIES))
def test_images_are_the_reference_defaults_and_vgpu_manager_is_tagged_per_os(family: str) -> None:
    nodes, tag = OS_FAMILIES[family]
    images = {
        state: container(daemonsets(render(op, ALL_ON, nodes))[app])["image"]
        for state, (op, app, _, _) in EXPECTED.items()
    }
    assert images == {
        "state-vfio-manager": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
        "state-sandbox-device-plugin": "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0",
        "state-sandbox-validation": "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "state-vgpu-manager": f"registry.example/nvidia/vgpu-manager:595.58-{tag}",
        "state-vgpu-device-manager": "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0",
        "state-kata-manager": "nvcr.io/nvidia/cloud-native/k8s-kata-manager:v0.2.3",
        "state-cc-manager": "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.4.3",
    }
    vgpu = daemonsets(render(VGPUManager(), ALL_ON, nodes))["nvidia-vgpu-manager-daemonset"]
    assert pod(vgpu)["nodeSelector"]["feature.node.kubernetes.io/system-os_release.ID"] == family


def test_vfio_manager_binds_on_start_and_unbinds_on_stop_after_unloading_the_driver() -> None:
    ds = daemonsets(render(VFIOManager(), ALL_ON, OS_FAMILIES["ubuntu"][0]))["nvidia-vfio-manager"]
    main = container(ds)
    assert "vfio-manage bind --all" in main["args"][0]
    assert main["lifecycle"]["preStop"]["exec"]["command"][-1] == "vfio-manage unbind --all"
    manager = init_container(ds, "k8s-driver-manager")
    assert manager["args"] == ["uninstall_driver"]
    assert env_of(manager)["ENABLE_GPU_POD_EVICTION"] == "false"
    assert main["resources"]["limits"] == {"memory": "200Mi"}
    custom = {**ALL_ON, "vfioManager": {"resources": {"limits": {"memory": "1Gi"}}}}
    ds = daemonsets(render(VFIOManager(), custom, OS_FAMILIES["ubuntu"][0]))["nvidia-vfio-manager"]
    assert container(ds)["resources"] == {"limits": {"memory": "1Gi"}}


def test_sandbox_device_plugin_waits_for_its_workload_and_takes_the_users_settings() -> None:
    spec = {
        **ALL_ON,
        "sandboxDevicePlugin": {
            "env": [{"name": "P_GPU_ALIAS", "value": "nvidia.com/gpu"}],
            "args": ["-v=4"],
        },
    }
    nodes = OS_FAMILIES["ubuntu"][0]
    ds = daemonsets(render(SandboxDevicePlugin(), spec, nodes))[
        "nvidia-sandbox-device-plugin-daemonset"
    ]
    assert env_of(container(ds)) == {"P_GPU_ALIAS": "nvidia.com/gpu"}
    assert container(ds)["args"] == ["-v=4"]
    # The image has no ENTRYPOINT, only CMD: args without a command would replace the
    # plugin and run "-v=4" as the program.
    assert container(ds)["command"] == ["nvidia-kubevirt-gpu-device-plugin"]
    # What the plugin touches on the host, as the reference mounts it: the kubelet's
    # device-plugin socket directory and the VFIO devices (it writes no CDI specs).
    assert [m["mountPath"] for m in container(ds)["volumeMounts"]] == [
        "/var/lib/kubelet/device-plugins",
        "/dev/vfio",
    ]
    passthrough = init_container(ds, "vfio-pci-validation")["args"][0]
    assert "vm-passthrough" in passthrough and "vfio-pci-ready" in passthrough
    vgpu = init_container(ds, "vgpu-devices-validation")["args"][0]
    assert "vm-vgpu" in vgpu and "vgpu-devices-ready" in vgpu
    assert volumes(ds)["device-plugin"]["hostPath"]["path"] == "/var/lib/kubelet/device-plugins"


def test_sandbox_validator_checks_only_what_the_policy_deploys() -> None:
    nodes = OS_FAMILIES["ubuntu"][0]
    ds = daemonsets(render(SandboxValidator(), ALL_ON, nodes))["nvidia-sandbox-validator"]
    steps = [c["name"] for c in pod(ds)["initContainers"]]
    assert steps == ["vfio-pci-validation", "vgpu-manager-validation", "vgpu-devices-validation"]
    assert env_of(pod(ds)["initContainers"][0])["COMPONENT"] == "vfio-pci"
    passthrough_only = {
        **ALL_ON,
        "vgpuManager": {"enabled": False},
        "vgpuDeviceManager": {"enabled": False},
    }
    ds = daemonsets(render(SandboxValidator(), passthrough_only, nodes))["nvidia-sandbox-validator"]
    assert [c["name"] for c in pod(ds)["initContainers"]] == ["vfio-pci-validation"]
    assert ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/part-of"] == "gpu-operator"


def test_vgpu_manager_says_what_is_missing_instead_of_a_broken_daemonset() -> None:
    nodes = OS_FAMILIES["ubuntu"][0]
    no_image = {**ALL_ON, "vgpuManager": {"enabled": True}}
    rendered = render(VGPUManager(), no_image, nodes)
    assert daemonsets(rendered) == {}
    ((reason, message),) = rendered.conditions
    assert reason == "VGPUManagerImageMissing" and "vgpuManager.repository" in message
    mixed = [*nodes, *OS_FAMILIES["rhel"][0]]
    rendered = render(VGPUManager(), ALL_ON, mixed)
    assert daemonsets(rendered) == {}
    assert [r for r, _ in rendered.conditions] == ["VGPUManagerMultipleOS"]
    # No vGPU host: nothing to run, nothing to say.
    passthrough_only = [n for n in nodes if n.name == "vm-1"]
    rendered = render(VGPUManager(), ALL_ON, passthrough_only)
    assert daemonsets(rendered) == {} and rendered.conditions == []


def test_vgpu_device_manager_reads_the_named_config() -> None:
    nodes = OS_FAMILIES["ubuntu"][0]
    ds = daemonsets(render(VGPUDeviceManager(), ALL_ON, nodes))["nvidia-vgpu-device-manager"]
    assert volumes(ds)["vgpu-config"]["configMap"]["name"] == "vgpu-devices"
    envs = env_of(container(ds))
    assert envs["DEFAULT_VGPU_CONFIG"] == "A100-4C"
    assert envs["CONFIG_FILE"] == "/vgpu-config/config.yaml"
    assert "vgpu-manager-ready" in init_container(ds, "vgpu-manager-validation")["args"][0]
    unnamed = {**ALL_ON, "vgpuDeviceManager": {}}
    rendered = render(VGPUDeviceManager(), unnamed, nodes)
    assert daemonsets(rendered) == {}
    assert [r for r, _ in rendered.conditions] == ["VGPUDevicesConfigMissing"]
    # Enabled by default: a cluster without vGPU hosts is not told to name a config.
    passthrough_only = [n for n in nodes if n.name == "vm-1"]
    rendered = render(VGPUDeviceManager(), unnamed, passthrough_only)
    assert daemonsets(rendered) == {} and rendered.conditions == []


def test_kata_manager_config_change_rolls_its_pods_and_follows_the_runtime() -> None:
    nodes = OS_FAMILIES["ubuntu"][0]
    rendered = render(KataManager(), ALL_ON, nodes)
    config = find(rendered, "ConfigMap", "nvidia-kata-manager-config")["data"]["config.yaml"]
    assert "artifactsDir: /opt/nvidia-gpu-operator/artifacts/runtimeclasses" in config
    ds = daemonsets(rendered)["nvidia-kata-manager"]
    annotation = "nvidia.com/kata-manager.last-applied-hash"
    before = ds["spec"]["template"]["metadata"]["annotations"][annotation]
    classes = {
        "runtimeClasses": [
            {"name": "kata-nvidia-gpu", "artifacts": {"url": "nvcr.io/nvidia/kata:1"}}
        ]
    }
    changed = {**ALL_ON, "kataManager": {"enabled": True, "config": classes}}
    rendered2 = render(KataManager(), changed, nodes)
    ds2 = daemonsets(rendered2)["nvidia-kata-manager"]
    # Each runtime class is a RuntimeClass that schedules onto the Kata manager's nodes.
    rc = find(rendered2, "RuntimeClass", "kata-nvidia-gpu")
    assert rc["handler"] == "kata-nvidia-gpu"
    assert rc["scheduling"] == {"nodeSelector": {DEPLOY + "kata-manager": "true"}}
    assert rc["metadata"]["labels"]["nvidia.com/kata-runtime-class"] == "true"
    assert ds2["spec"]["template"]["metadata"]["annotations"][annotation] != before
    assert env_of(container(ds))["RUNTIME_CONFIG"].endswith("config.toml")
    assert pod(ds)["hostPID"] is True
    crio = [gpu_node(n.name, "rhel", "9.4", RHEL_KERNEL, runtime="cri-o://1.31") for n in nodes]
    ds3 = daemonsets(render(KataManager(), ALL_ON, crio))["nvidia-kata-manager"]
    assert "crio-config" in volumes(ds3) and "containerd-config" not in volumes(ds3)


def test_cc_manager_runs_on_cc_capable_nodes_in_the_default_mode() -> None:
    nodes = OS_FAMILIES["ubuntu"][0]
    ds = daemonsets(render(CCManager(), ALL_ON, nodes))["nvidia-cc-manager"]
    assert pod(ds)["nodeSelector"]["nvidia.com/cc.capable"] == "true"
    assert env_of(container(ds))["DEFAULT_CC_MODE"] == "on"
    no_mode = {**ALL_ON, "ccManager": {"enabled": True}}
    ds = daemonsets(render(CCManager(), no_mode, nodes))["nvidia-cc-manager"]
    assert "DEFAULT_CC_MODE" not in env_of(container(ds))


def _grants(rules: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for r in rules
        for group in r["apiGroups"]
        for resource in r["resources"]
        for verb in r["verbs"]
    }


def test_vm_operand_roles_stay_within_what_the_operator_may_grant() -> None:
    """The API server refuses a role granting more than its creator holds (no `escalate`):
    every VM operand's rules must be in config/rbac's ClusterRole (or, for a Role in the
    operator's namespace, its Role)."""
    operator: dict[str, set[tuple[str, str, str]]] = {}
    for name in ("cluster_role.yaml", "role.yaml"):
        for doc in yaml.safe_load_all((REPO / "config" / "rbac" / name).read_text()):
            if doc and doc["metadata"]["name"] == "gpu-operator":
                operator[doc["kind"]] = _grants(doc["rules"])
    checked = 0
    for op, _, _, _ in EXPECTED.values():
        for obj in render(op, ALL_ON, OS_FAMILIES["ubuntu"][0]).objects:
            if obj["kind"] == "ClusterRole":
                assert _grants(obj["rules"]) <= operator["ClusterRole"], op.name
                checked += 1
            elif obj["kind"] == "Role":
                held = operator["ClusterRole"] | operator["Role"]
                assert _grants(obj["rules"]) <= held, op.name
                checked += 1
    assert checked >= 7


def test_the_daemonsets_section_and_host_network_reach_every_vm_operand() -> None:
    context = {"runAsUser": 0, "seccompProfile": {"type": "RuntimeDefault"}}
    spec: dict[str, Any] = {
        **ALL_ON,
        "daemonsets": {
            "priorityClassName": "gpu-critical",
            "labels": {"team": "vms"},
            "podSecurityContext": context,
            "updateStrategy": "OnDelete",
        },
        "vfioManager": {"hostNetwork": True},
    }
    nodes = OS_FAMILIES["rhel"][0]
    for state, (op, app, _, _) in EXPECTED.items():
        ds = daemonsets(render(op, spec, nodes))[app]
        assert pod(ds)["priorityClassName"] == "gpu-critical", state
        assert pod(ds)["securityContext"] == context, state
        assert ds["spec"]["template"]["metadata"]["labels"]["team"] == "vms", state
        assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}, state
        assert pod(ds).get("hostNetwork", False) is (state == "state-vfio-manager"), state


def test_a_vm_node_does_not_count_for_the_container_operands() -> None:
    """A passthrough node has no driver: switching the only RHEL node to VMs must not leave a
    RHEL driver DaemonSet behind nor rename the Ubuntu one (its pods would be relabelled)."""
    vm_labels = {DEPLOY + k: "true" for k in ("sandbox-validator", "vfio-manager")}
    nodes = [
        gpu_node("gpu-ubuntu-1"),
        gpu_node("gpu-ubuntu-2"),
        gpu_node("gpu-rhel-vm", "rhel", "9.4", RHEL_KERNEL, mig_capable=True, labels=vm_labels),
    ]
    rendered = render(Driver(), ALL_ON, nodes)
    assert set(daemonsets(rendered)) == {"nvidia-driver-daemonset"}
    assert rendered.conditions == []
    # Nor does its MIG-capable GPU bring a MIG manager no container node needs.
    assert daemonsets(render(MIGManager(), ALL_ON, nodes)) == {}
