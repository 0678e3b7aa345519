"""The MPS control daemon: there exactly where a node's device-plugin config asks for MPS."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from components.operands import MPSControlDaemon, Rendered

from .cases import (
    RHEL_KERNEL,
    container,
    daemonsets,
    env_of,
    gpu_node,
    init_container,
    kinds_and_names,
    mounts,
    pod,
    policy,
    view,
    volumes,
)

pytestmark = pytest.mark.unit

CONFIGS = "plugin-configs"
MPS_CONFIG = """version: v1
sharing:
  mps:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
TIME_SLICING = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
DATA = {"mps-4": MPS_CONFIG, "ts-4": TIME_SLICING}
UBUNTU = gpu_node("gpu-ubuntu", labels={"nvidia.com/device-plugin.config": "mps-4"})
RHEL = gpu_node(
    "gpu-rhel", "rhel", "9.4", RHEL_KERNEL, labels={"nvidia.com/device-plugin.config": "mps-4"}
)


def render(
    nodes: Sequence[Any] = (UBUNTU, RHEL),
    data: Mapping[str, str] = DATA,
    default: str = "",
    spec: Mapping[str, Any] | None = None,
) -> Rendered:
    plugin: dict[str, Any] = {"config": {"name": CONFIGS, "default": default}}
    full = {"devicePlugin": plugin, **(spec or {})}
    rendered: Rendered = MPSControlDaemon().render(
        policy(full), view(nodes, config_map_data={CONFIGS: dict(data)})
    )
    return rendered


def only_ds(rendered: Rendered) -> dict[str, Any]:
    (ds,) = daemonsets(rendered).values()
    return ds


def terms(ds: Mapping[str, Any]) -> list[Any]:
    affinity = pod(ds)["affinity"]["nodeAffinity"]
    selector = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
    out: list[Any] = selector["nodeSelectorTerms"]
    return out


def test_every_object_for_nodes_of_two_os_families() -> None:
    rendered = render()
    assert rendered.conditions == []
    assert kinds_and_names(rendered) == {
        ("ServiceAccount", "nvidia-device-plugin-mps-control-daemon"),
        ("ClusterRole", "nvidia-device-plugin-mps-control-daemon"),
        ("ClusterRoleBinding", "nvidia-device-plugin-mps-control-daemon"),
        ("DaemonSet", "nvidia-device-plugin-mps-control-daemon"),
    }
    for obj in rendered.objects:
        labels = obj["metadata"]["labels"]
        assert labels["nvidia.com/gpu-operator.component"] == "state-mps-control-daemon"
        assert labels["app.kubernetes.io/managed-by"] == "gpu-operator"
    ds = only_ds(rendered)
    assert ds["metadata"]["namespace"] == "gpu-operator"
    assert ds["spec"]["selector"]["matchLabels"]["app"] == "nvidia-device-plugin-mps-control-daemon"
    spec = pod(ds)
    assert spec["nodeSelector"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    assert spec["hostPID"] is True
    assert spec["serviceAccountName"] == "nvidia-device-plugin-mps-control-daemon"
    daemon = container(ds, "mps-control-daemon-ctr")
    assert daemon["command"] == ["mps-control-daemon"]
    assert daemon["image"].startswith("nvcr.io/nvidia/k8s-device-plugin:")
    assert env_of(daemon)["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env_of(daemon)["CONFIG_FILE"] == "/config/config.yaml"
    assert mounts(daemon)["/mps"] == "mps-root"
    assert mounts(daemon)["/dev/shm"] == "mps-shm"
    shm = init_container(ds, "mps-control-daemon-mounts")
    assert shm["command"] == ["mps-control-daemon", "mount-shm"]
    assert shm["volumeMounts"][0]["mountPropagation"] == "Bidirectional"
    sidecar = container(ds, "config-manager")
    assert env_of(sidecar)["PROCESS_TO_SIGNAL"] == "/usr/bin/mps-control-daemon"
    assert env_of(sidecar)["NODE_LABEL"] == "nvidia.com/device-plugin.config"
    vols = volumes(ds)
    assert vols["mps-root"]["hostPath"]["path"] == "/run/nvidia/mps"
    assert vols["mps-shm"]["hostPath"]["path"] == "/run/nvidia/mps/shm"
    assert vols[CONFIGS]["configMap"]["name"] == CONFIGS
    # one DaemonSet for both OS families: the daemon does not depend on the OS
    (term,) = terms(ds)
    assert term["matchExpressions"][0] == {
        "key": "nvidia.com/device-plugin.config",
        "operator": "In",
        "values": ["mps-4"],
    }


def test_no_daemon_without_an_mps_config_in_use() -> None:
    sliced = gpu_node("a", labels={"nvidia.com/device-plugin.config": "ts-4"})
    assert render([sliced]).objects == []
    assert render([gpu_node("b")]).objects == []  # no label, no default
    assert render(data={"ts-4": TIME_SLICING}).objects == []
    # no ConfigMap named: the operand is off
    assert MPSControlDaemon().enabled(policy()) is False
    off = policy({"devicePlugin": {"enabled": False, "config": {"name": CONFIGS}}})
    assert MPSControlDaemon().enabled(off) is False


def test_the_default_config_covers_unlabelled_nodes() -> None:
    ds = only_ds(render([gpu_node("plain")], default="mps-4"))
    assert [t["matchExpressions"][0]["operator"] for t in terms(ds)] == ["In", "DoesNotExist"]
    # a ConfigMap with a single config: that one is the default
    ds = only_ds(render([gpu_node("plain")], data={"only": MPS_CONFIG}))
    assert len(terms(ds)) == 2


def test_nodes_opted_out_of_the_device_plugin_need_no_daemon() -> None:
    out = gpu_node(
        "out",
        labels={
            "nvidia.com/device-plugin.config": "mps-4",
            "nvidia.com/gpu.deploy.device-plugin": "false",
        },
    )
    rendered = render([out])
    assert rendered.objects == []
    assert rendered.conditions == []


def test_mps_config_without_the_daemon_is_a_condition() -> None:
    kept_off = gpu_node(
        "kept-off",
        labels={
            "nvidia.com/device-plugin.config": "mps-4",
            "nvidia.com/gpu.deploy.mps-control-daemon": "false",
        },
    )
    rendered = render([kept_off])
    assert rendered.objects == []
    ((reason, message),) = rendered.conditions
    assert reason == "MPSControlDaemonMissing"
    assert "GPU node kept-off uses a device-plugin config with MPS sharing" in message
    # the others still get it, and the affinity keeps it off the opted-out node
    rendered = render([kept_off, UBUNTU])
    assert [r for r, _ in rendered.conditions] == ["MPSControlDaemonMissing"]
    (term,) = terms(only_ds(rendered))
    assert {
        "key": "nvidia.com/gpu.deploy.mps-control-daemon",
        "operator": "NotIn",
        "values": ["false"],
    } in term["matchExpressions"]


def test_an_unreadable_config_is_a_condition() -> None:
    rendered = render(data={**DATA, "broken": "sharing: [mps"})
    assert [r for r, _ in rendered.conditions] == ["DevicePluginConfigUnreadable"]
    assert "broken" in rendered.conditions[0][1]
    assert daemonsets(rendered)  # the readable MPS config still gets its daemon


def test_user_settings_reach_the_daemon() -> None:
    spec = {
        "devicePlugin": {
            "config": {"name": CONFIGS},
            "mps": {"root": "/var/mps"},
            "env": [{"name": "EXTRA", "value": "1"}],
            "imagePullSecrets": ["regcred"],
        }
    }
    ds = only_ds(
        MPSControlDaemon().render(policy(spec), view([UBUNTU], config_map_data={CONFIGS: DATA}))
    )
    assert volumes(ds)["mps-root"]["hostPath"]["path"] == "/var/mps"
    assert volumes(ds)["mps-shm"]["hostPath"]["path"] == "/var/mps/shm"
    assert env_of(container(ds, "mps-control-daemon-ctr"))["EXTRA"] == "1"
    assert pod(ds)["imagePullSecrets"] == [{"name": "regcred"}]


DEEP = "version: v1\nsharing: " + "[" * 5000 + "]" * 5000 + "\n"
"""Nesting that took the pure-Python YAML parser past Python's recursion limit."""
FLOW_900KB = "version: v1\nflags: [" + ", ".join(["1"] * 300_000) + "]\n"
"""A 900 KB flow list: 16 s of the pure-Python parser's CPU on every reconcile."""


def test_a_deeply_nested_config_is_a_condition_and_the_rest_still_renders() -> None:
    rendered = render(data={**DATA, "deep": DEEP})
    ((reason, message),) = rendered.conditions
    assert reason == "DevicePluginConfigUnreadable"
    assert message.startswith(
        "device-plugin config deep in ConfigMap gpu-operator/plugin-configs cannot be read: "
        "invalid YAML: nested deeper than 100 levels"
    )
    assert message.endswith(
        "; no MPS control daemon runs for the nodes that use it until it is fixed"
    )
    assert daemonsets(rendered)  # the readable MPS config still gets its daemon


def test_a_config_too_large_to_read_is_a_condition() -> None:
    rendered = render(data={**DATA, "flags": FLOW_900KB})
    ((reason, message),) = rendered.conditions
    assert reason == "DevicePluginConfigUnreadable"
    assert message == (
        "device-plugin config flags in ConfigMap gpu-operator/plugin-configs cannot be read: "
        "it is 879 KiB, over the 64 KiB a device-plugin config may be; no MPS control "
        "daemon runs for the nodes that use it until it is fixed"
    )
    assert daemonsets(rendered)
