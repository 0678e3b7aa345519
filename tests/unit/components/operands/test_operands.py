"""The other operands: what an admin sees for each, and what the policy changes in it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml

from components.operands import (
    DCGM,
    OPERANDS,
    DCGMExporter,
    DevicePlugin,
    GPUFeatureDiscovery,
    GPUNode,
    MIGManager,
    NodeStatusExporter,
    OperatorServiceMonitor,
    Prerequisites,
    Rendered,
    Validator,
)
from components.operands.mig_manager import mig_parted_config

from .cases import (
    CLUSTER,
    DIGEST,
    NAMESPACE,
    container,
    daemonsets,
    env_of,
    find,
    gpu_node,
    init_container,
    kinds_and_names,
    mounts,
    operand,
    pod,
    policy,
    view,
    volumes,
)

pytestmark = pytest.mark.unit


def render(
    op: Any,
    spec: Mapping[str, Any] | None = None,
    nodes: Sequence[GPUNode] = CLUSTER,
    **kw: Any,
) -> Rendered:
    rendered: Rendered = op.render(policy(spec), view(nodes, **kw))
    return rendered


def only_ds(rendered: Rendered) -> dict[str, Any]:
    (ds,) = daemonsets(rendered).values()
    return ds


# --- pre-requisites ------------------------------------------------------------------------


def test_runtime_class_nvidia() -> None:
    rc = find(render(Prerequisites()), "RuntimeClass", "nvidia")
    assert rc["apiVersion"] == "node.k8s.io/v1"
    assert rc["handler"] == "nvidia"
    custom = find(
        render(Prerequisites(), {"operator": {"runtimeClass": "nvidia-cdi"}}),
        "RuntimeClass",
        "nvidia-cdi",
    )
    assert custom["handler"] == "nvidia-cdi"


# --- images ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "section", "image"),
    [
        (DevicePlugin(), "devicePlugin", "nvcr.io/nvidia/k8s-device-plugin"),
        (DCGM(), "dcgm", "nvcr.io/nvidia/cloud-native/dcgm"),
        (DCGMExporter(), "dcgmExporter", "nvcr.io/nvidia/k8s/dcgm-exporter"),
        (GPUFeatureDiscovery(), "gfd", "nvcr.io/nvidia/k8s-device-plugin"),
        (MIGManager(), "migManager", "nvcr.io/nvidia/cloud-native/k8s-mig-manager"),
        (Validator(), "validator", "nvcr.io/nvidia/gpu-operator"),
    ],
)
def test_digest_versions_pin_images(op: Any, section: str, image: str) -> None:
    spec = {section: {"version": DIGEST, "imagePullPolicy": "Always", "imagePullSecrets": ["ngc"]}}
    ds = only_ds(render(op, spec))
    assert container(ds)["image"] == f"{image}@{DIGEST}"
    assert container(ds)["imagePullPolicy"] == "Always"
    assert pod(ds)["imagePullSecrets"] == [{"name": "ngc"}]


def test_private_registry_for_every_operand() -> None:
    p = policy(
        {
            section: {"repository": "registry.example.com/nvidia"}
            for section in (
                "devicePlugin",
                "dcgm",
                "dcgmExporter",
                "gfd",
                "migManager",
                "validator",
                "toolkit",
            )
        }
    )
    v = view()
    for op in OPERANDS:
        for ds in daemonsets(op.render(p, v)).values():
            if ds["metadata"]["name"].startswith("nvidia-driver"):
                continue
            for ctr in pod(ds)["containers"] + pod(ds).get("initContainers", []):
                assert ctr["image"].startswith("registry.example.com/nvidia/"), ctr["name"]


# --- device plugin -------------------------------------------------------------------------


def test_device_plugin_defaults() -> None:
    ds = only_ds(render(DevicePlugin()))
    env = env_of(container(ds))
    assert env["MIG_STRATEGY"] == "none"
    assert "NVIDIA_MIG_MONITOR_DEVICES" not in env
    assert env["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"
    assert env["NVIDIA_CDI_HOOK_PATH"] == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert pod(ds)["runtimeClassName"] == "nvidia"
    assert [c["name"] for c in pod(ds)["containers"]] == ["nvidia-device-plugin"]
    assert "config-manager-init" not in [c["name"] for c in pod(ds)["initContainers"]]


def test_device_plugin_mig_strategy_env_and_user_env() -> None:
    spec = {
        "mig": {"strategy": "mixed"},
        "cdi": {"enabled": False},
        "devicePlugin": {
            "env": [{"name": "PASS_DEVICE_SPECS", "value": "false"}],
            "args": ["--fail-on-init-error=false"],
        },
    }
    ctr = container(only_ds(render(DevicePlugin(), spec)))
    env = env_of(ctr)
    assert env["MIG_STRATEGY"] == "mixed"
    assert env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"
    assert env["PASS_DEVICE_SPECS"] == "false"
    assert env["DEVICE_LIST_STRATEGY"] == "envvar"
    assert ctr["args"] == ["--fail-on-init-error=false"]


def test_device_plugin_config_map_brings_the_config_manager() -> None:
    spec = {"devicePlugin": {"config": {"name": "plugin-configs", "default": "any"}}}
    for op in (DevicePlugin(), GPUFeatureDiscovery()):
        ds = only_ds(render(op, spec))
        main = container(ds)
        assert env_of(main)["CONFIG_FILE"] == "/config/config.yaml"
        assert mounts(main)["/available-configs"] == "plugin-configs"
        sidecar = container(ds, "config-manager")
        assert env_of(sidecar)["DEFAULT_CONFIG"] == "any"
        assert env_of(init_container(ds, "config-manager-init"))["ONESHOT"] == "true"
        assert sidecar["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
        assert volumes(ds)["plugin-configs"]["configMap"]["name"] == "plugin-configs"
        assert pod(ds)["shareProcessNamespace"] is True


def test_resources_apply_to_the_operand_container() -> None:
    spec = {
        "devicePlugin": {"resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "512Mi"}}}
    }
    ctr = container(only_ds(render(DevicePlugin(), spec)))
    assert ctr["resources"] == {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}}


# --- common daemonset settings -------------------------------------------------------------


def test_daemonsets_section_applies_to_every_operand() -> None:
    spec = {
        "daemonsets": {
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
            ],
            "priorityClassName": "gpu-critical",
            "labels": {"team": "ml", "app": "ignored"},
            "annotations": {"note": "x"},
            "updateStrategy": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%"},
        }
    }
    p, v = policy(spec), view()
    for op in OPERANDS:
        for name, ds in daemonsets(op.render(p, v)).items():
            assert pod(ds)["priorityClassName"] == "gpu-critical"
            tolerations = pod(ds)["tolerations"]
            assert {
                "key": "dedicated",
                "operator": "Equal",
                "value": "gpu",
                "effect": "NoSchedule",
            } in tolerations
            assert {
                "key": "nvidia.com/gpu",
                "operator": "Exists",
                "effect": "NoSchedule",
            } in tolerations
            labels = ds["spec"]["template"]["metadata"]["labels"]
            assert labels["team"] == "ml" and labels["app"] != "ignored"
            assert ds["spec"]["template"]["metadata"]["annotations"]["note"] == "x"
            if not name.startswith("nvidia-driver"):
                assert ds["spec"]["updateStrategy"] == {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%"},
                }


HOST_NETWORK_SECTIONS = {
    "driver": "nvidia-driver-daemonset",
    "toolkit": "nvidia-container-toolkit-daemonset",
    "devicePlugin": "nvidia-device-plugin-daemonset",
    "dcgm": "nvidia-dcgm",
    "dcgmExporter": "nvidia-dcgm-exporter",
    "gfd": "gpu-feature-discovery",
    "migManager": "nvidia-mig-manager",
    "nodeStatusExporter": "nvidia-node-status-exporter",
    "validator": "nvidia-operator-validator",
}


def all_daemonsets(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    p, v = policy(spec), view([gpu_node("a", mig_capable=True)])
    out: dict[str, dict[str, Any]] = {}
    for op in OPERANDS:
        if op.enabled(p):
            out.update(daemonsets(op.render(p, v)))
    return out


@pytest.mark.parametrize("section", sorted(HOST_NETWORK_SECTIONS))
def test_host_network_puts_that_operand_alone_on_the_host_network(section: str) -> None:
    spec: dict[str, Any] = {"nodeStatusExporter": {"enabled": True}, "dcgm": {"enabled": True}}
    spec.setdefault(section, {})["hostNetwork"] = True
    found = all_daemonsets(spec)
    assert set(HOST_NETWORK_SECTIONS.values()) <= set(found)
    for name, ds in found.items():
        on_host = name == HOST_NETWORK_SECTIONS[section]
        assert pod(ds).get("hostNetwork", False) is on_host, name
        # Cluster names still resolve from the host's network namespace.
        assert pod(ds).get("dnsPolicy") == ("ClusterFirstWithHostNet" if on_host else None)


def test_pod_security_context_on_every_operand_pod() -> None:
    context = {"runAsUser": 0, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}}
    found = all_daemonsets(
        {"daemonsets": {"podSecurityContext": context}, "nodeStatusExporter": {"enabled": True}}
    )
    assert len(found) >= 9
    for name, ds in found.items():
        assert pod(ds)["securityContext"] == context, name
    assert not [n for n, ds in all_daemonsets({}).items() if "securityContext" in pod(ds)]


def test_kubelet_root_dir_moves_the_host_side_of_kubelet_mounts() -> None:
    spec = {"hostPaths": {"kubeletRootDir": "/var/snap/microk8s/common/var/lib/kubelet/"}}
    found = all_daemonsets(spec)
    root = "/var/snap/microk8s/common/var/lib/kubelet"
    plugin = found["nvidia-device-plugin-daemonset"]
    assert volumes(plugin)["device-plugin"]["hostPath"]["path"] == f"{root}/device-plugins"
    # The plugin registers where it always looks, inside its container.
    assert mounts(container(plugin))["/var/lib/kubelet/device-plugins"] == "device-plugin"
    exporter = found["nvidia-dcgm-exporter"]
    assert volumes(exporter)["pod-gpu-resources"]["hostPath"]["path"] == f"{root}/pod-resources"
    assert mounts(container(exporter))["/var/lib/kubelet/pod-resources"] == "pod-gpu-resources"
    # Nothing else on the host under the default kubelet root.
    for name, ds in found.items():
        host = [v["hostPath"]["path"] for v in volumes(ds).values() if "hostPath" in v]
        assert not [p for p in host if p.startswith("/var/lib/kubelet")], name


def test_on_delete_strategy_from_the_policy() -> None:
    ds = only_ds(render(DCGM(), {"daemonsets": {"updateStrategy": "OnDelete"}}))
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}


# --- DCGM and its exporter ----------------------------------------------------------------


def test_dcgm_service_and_exporter_connection() -> None:
    svc = find(render(DCGM()), "Service", "nvidia-dcgm")
    assert svc["spec"]["ports"][0]["port"] == 5555
    assert svc["spec"]["internalTrafficPolicy"] == "Local"
    env = env_of(container(only_ds(render(DCGMExporter()))))
    assert env["DCGM_REMOTE_HOSTENGINE_INFO"] == "nvidia-dcgm:5555"
    env = env_of(container(only_ds(render(DCGMExporter(), {"dcgm": {"enabled": False}}))))
    assert "DCGM_REMOTE_HOSTENGINE_INFO" not in env


def test_dcgm_exporter_service_on_9400() -> None:
    rendered = render(DCGMExporter(), {"dcgmExporter": {"service": {"type": "NodePort"}}})
    svc = find(rendered, "Service", "nvidia-dcgm-exporter")
    assert svc["spec"]["ports"] == [
        {"name": "gpu-metrics", "port": 9400, "targetPort": 9400, "protocol": "TCP"}
    ]
    assert svc["spec"]["selector"] == {"app": "nvidia-dcgm-exporter"}
    assert svc["spec"]["type"] == "NodePort"
    assert container(only_ds(rendered))["ports"] == [{"name": "metrics", "containerPort": 9400}]


def test_service_monitor_only_with_the_crd_and_when_enabled() -> None:
    on = {
        "dcgmExporter": {
            "serviceMonitor": {
                "enabled": True,
                "interval": "15s",
                "scrapeTimeout": "10s",
                "additionalLabels": {"release": "prom"},
            }
        }
    }
    with_crd = render(DCGMExporter(), on, service_monitors=True)
    monitor = find(with_crd, "ServiceMonitor", "nvidia-dcgm-exporter")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [
        {"port": "gpu-metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert with_crd.conditions == []

    without_crd = render(DCGMExporter(), on, service_monitors=False)
    assert ("ServiceMonitor", "nvidia-dcgm-exporter") not in kinds_and_names(without_crd)
    assert [r for r, _ in without_crd.conditions] == ["ServiceMonitorCRDMissing"]

    off = render(DCGMExporter(), service_monitors=True)
    assert ("ServiceMonitor", "nvidia-dcgm-exporter") not in kinds_and_names(off)
    assert off.conditions == []


def test_operator_service_monitor_selects_the_operator_service() -> None:
    on = {
        "operator": {
            "metrics": {
                "serviceMonitor": {
                    "enabled": True,
                    "interval": "30s",
                    "honorLabels": True,
                    "additionalLabels": {"release": "prom"},
                }
            }
        }
    }
    with_crd = render(OperatorServiceMonitor(), on, service_monitors=True)
    monitor = find(with_crd, "ServiceMonitor", "gpu-operator")
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    # The Service of config/manager and the Helm chart carries `app: gpu-operator`.
    assert monitor["spec"]["selector"] == {"matchLabels": {"app": "gpu-operator"}}
    # Secure metrics: HTTPS, Prometheus' own token, the self-signed certificate unverified.
    assert monitor["spec"]["endpoints"] == [
        {
            "port": "gpu-operator-metrics",
            "path": "/metrics",
            "interval": "30s",
            "honorLabels": True,
            "scheme": "https",
            "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "tlsConfig": {"insecureSkipVerify": True},
        }
    ]
    assert with_crd.conditions == []

    without_crd = render(OperatorServiceMonitor(), on, service_monitors=False)
    assert without_crd.objects == []
    assert [r for r, _ in without_crd.conditions] == ["ServiceMonitorCRDMissing"]

    assert not OperatorServiceMonitor().enabled(policy())


def test_custom_metrics_config_map_is_mounted() -> None:
    ds = only_ds(render(DCGMExporter(), {"dcgmExporter": {"config": {"name": "my-metrics"}}}))
    ctr = container(ds)
    assert env_of(ctr)["DCGM_EXPORTER_COLLECTORS"] == "/etc/dcgm-exporter/dcgm-metrics.csv"
    assert mounts(ctr)["/etc/dcgm-exporter/dcgm-metrics.csv"] == "metrics-config"
    assert volumes(ds)["metrics-config"]["configMap"]["name"] == "my-metrics"


def test_dcgm_exporter_pod_labels_and_env_override() -> None:
    spec = {
        "dcgmExporter": {
            "podLabels": {"scrape": "yes"},
            "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": ":9500"}],
            "hostPID": True,
        }
    }
    ds = only_ds(render(DCGMExporter(), spec))
    assert ds["spec"]["template"]["metadata"]["labels"]["scrape"] == "yes"
    assert env_of(container(ds))["DCGM_EXPORTER_LISTEN"] == ":9500"
    assert pod(ds)["hostPID"] is True


# --- GFD ---------------------------------------------------------------------------------------


def test_gfd_writes_feature_files_for_nfd() -> None:
    ds = only_ds(render(GPUFeatureDiscovery(), {"mig": {"strategy": "single"}}))
    ctr = container(ds)
    assert mounts(ctr)["/etc/kubernetes/node-feature-discovery/features.d"] == "output-dir"
    assert env_of(ctr)["MIG_STRATEGY"] == "single"
    assert ds["spec"]["selector"]["matchLabels"] == {
        "app": "gpu-feature-discovery",
        "app.kubernetes.io/part-of": "nvidia-gpu",
    }


# --- MIG manager ---------------------------------------------------------------------------


def test_mig_manager_only_with_mig_capable_nodes() -> None:
    without = [gpu_node("a"), gpu_node("b")]
    assert MIGManager().enabled(policy()) is True
    assert render(MIGManager(), nodes=without).objects == []
    opted_out = [
        gpu_node("m", mig_capable=True, labels={"nvidia.com/gpu.deploy.mig-manager": "false"})
    ]
    assert render(MIGManager(), nodes=opted_out).objects == []
    ds = only_ds(render(MIGManager()))
    assert pod(ds)["nodeSelector"] == {"nvidia.com/gpu.deploy.mig-manager": "true"}


def test_mig_parted_default_config() -> None:
    rendered = render(MIGManager())
    cm = find(rendered, "ConfigMap", "default-mig-parted-config")
    config = yaml.safe_load(cm["data"]["config.yaml"])
    assert config == mig_parted_config()
    configs = config["mig-configs"]
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    assert configs["all-enabled"] == [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]
    # only the A100-40GB has 1g.5gb: no device filter, as the reference writes it
    assert configs["all-1g.5gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}
    ]
    # 1g.10gb fits seven times on the 80 GB A100 and H100, four times on the A100-40GB
    shared, a100_40 = sorted(configs["all-1g.10gb"], key=lambda e: -e["mig-devices"]["1g.10gb"])
    assert shared["mig-devices"] == {"1g.10gb": 7}
    assert {"0x20B210DE", "0x233010DE"} <= set(shared["device-filter"])
    assert a100_40["mig-devices"] == {"1g.10gb": 4}
    assert "0x20B010DE" in a100_40["device-filter"]
    for profile in ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"):
        assert f"all-{profile}" in configs
    assert configs["all-7g.141gb"][0]["mig-devices"] == {"7g.141gb": 1}
    balanced = {tuple(e["device-filter"]): e["mig-devices"] for e in configs["all-balanced"]}
    assert balanced[("0x20B710DE",)] == {"1g.6gb": 2, "2g.12gb": 1}
    assert balanced[("0x233510DE", "0x233B10DE")] == {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    clients = find(rendered, "ConfigMap", "default-gpu-clients")
    assert (
        "nvidia-dcgm.service" in yaml.safe_load(clients["data"]["clients.yaml"])["systemd-services"]
    )
    ds = only_ds(rendered)
    vols = volumes(ds)
    assert vols["mig-parted-default-config"]["configMap"]["name"] == "default-mig-parted-config"
    assert "mig-parted-config" not in vols
    assert vols["gpu-clients"]["configMap"]["name"] == "default-gpu-clients"
    env = env_of(container(ds, "nvidia-mig-manager"))
    assert env["DEFAULT_CONFIG_FILE"] == "/mig-parted-default-config/config.yaml"
    assert "CONFIG_FILE" not in env
    assert mounts(container(ds, "nvidia-mig-manager"))["/mig-parted-default-config"] == (
        "mig-parted-default-config"
    )


def test_custom_mig_config_map_is_used_over_the_default() -> None:
    spec = {
        "migManager": {"config": {"name": "my-mig"}, "gpuClientsConfig": {"name": "my-clients"}}
    }
    rendered = render(MIGManager(), spec)
    names = kinds_and_names(rendered)
    # the built-in layouts stay available as the default; the user's file wins
    assert ("ConfigMap", "default-mig-parted-config") in names
    assert ("ConfigMap", "default-gpu-clients") not in names
    ds = only_ds(rendered)
    assert volumes(ds)["mig-parted-config"]["configMap"]["name"] == "my-mig"
    assert volumes(ds)["gpu-clients"]["configMap"]["name"] == "my-clients"
    ctr = container(ds, "nvidia-mig-manager")
    assert env_of(ctr)["CONFIG_FILE"] == "/mig-parted-config/config.yaml"
    assert env_of(ctr)["DEFAULT_CONFIG_FILE"] == "/mig-parted-default-config/config.yaml"
    assert mounts(ctr)["/mig-parted-config"] == "mig-parted-config"


def test_mig_manager_reaches_the_host_driver_and_its_clients() -> None:
    ds = only_ds(render(MIGManager()))
    spec = pod(ds)
    assert spec["hostPID"] is True
    assert spec["hostIPC"] is True
    vols = volumes(ds)
    assert vols["driver-install-dir"]["hostPath"]["path"] == "/run/nvidia/driver"
    assert vols["cdi-root"]["hostPath"]["path"] == "/var/run/cdi"
    ctr = container(ds, "nvidia-mig-manager")
    assert mounts(ctr)["/driver-root"] == "driver-install-dir"
    assert mounts(ctr)["/var/run/cdi"] == "cdi-root"
    env = env_of(ctr)
    # the operator's driver container: no host services to stop
    assert env["WITH_SHUTDOWN_HOST_GPU_CLIENTS"] == "false"
    assert (env["DRIVER_ROOT"], env["DRIVER_ROOT_CTR_PATH"]) == (
        "/run/nvidia/driver",
        "/driver-root",
    )


def test_mig_manager_stops_host_gpu_clients_with_a_host_driver() -> None:
    ds = only_ds(render(MIGManager(), {"driver": {"enabled": False}}))
    env = env_of(container(ds, "nvidia-mig-manager"))
    assert env["WITH_SHUTDOWN_HOST_GPU_CLIENTS"] == "true"
    assert (env["DRIVER_ROOT"], env["DRIVER_ROOT_CTR_PATH"]) == ("/", "/host")
    assert env["GPU_CLIENTS_FILE"] == "/gpu-clients/clients.yaml"


# --- validator ----------------------------------------------------------------------------


def test_validator_checks_each_layer_in_order() -> None:
    spec = {
        "mig": {"strategy": "single"},
        "validator": {
            "env": [{"name": "WITH_WORKLOAD", "value": "false"}],
            "plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]},
            "cuda": {"env": [{"name": "X", "value": "1"}]},
        },
    }
    ds = only_ds(render(Validator(), spec))
    steps = [c["name"] for c in pod(ds)["initContainers"]]
    assert steps == [
        "driver-validation",
        "toolkit-validation",
        "cuda-validation",
        "plugin-validation",
    ]
    plugin = env_of(init_container(ds, "plugin-validation"))
    assert plugin["WITH_WORKLOAD"] == "false"
    assert plugin["MIG_STRATEGY"] == "single"
    assert plugin["VALIDATOR_IMAGE"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert env_of(init_container(ds, "cuda-validation"))["X"] == "1"
    assert env_of(container(ds))["WITH_WORKLOAD"] == "false"
    assert ds["spec"]["selector"]["matchLabels"]["app.kubernetes.io/part-of"] == "gpu-operator"
    assert Validator().enabled(policy({"validator": {}})) is True


def test_validator_skips_plugin_validation_without_device_plugin() -> None:
    ds = only_ds(render(Validator(), {"devicePlugin": {"enabled": False}}))
    assert "plugin-validation" not in [c["name"] for c in pod(ds)["initContainers"]]


# --- node status exporter -----------------------------------------------------------------


def test_node_status_exporter_off_by_default_and_on_when_asked() -> None:
    assert NodeStatusExporter().enabled(policy()) is False
    rendered = render(
        NodeStatusExporter(), {"nodeStatusExporter": {"enabled": True}}, service_monitors=True
    )
    ds = only_ds(rendered)
    assert ds["spec"]["template"]["metadata"]["labels"]["app"] == "nvidia-node-status-exporter"
    assert env_of(container(ds))["COMPONENT"] == "metrics"
    assert container(ds)["image"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert (
        find(rendered, "Service", "nvidia-node-status-exporter")["spec"]["ports"][0]["port"] == 8000
    )
    assert ("ServiceMonitor", "nvidia-node-status-exporter") in kinds_and_names(rendered)


# --- disabled operands ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "spec"),
    [
        ("state-container-toolkit", {"toolkit": {"enabled": False}}),
        ("state-device-plugin", {"devicePlugin": {"enabled": False}}),
        ("state-dcgm", {"dcgm": {"enabled": False}}),
        ("state-dcgm-exporter", {"dcgmExporter": {"enabled": False}}),
        ("gpu-feature-discovery", {"gfd": {"enabled": False}}),
        ("state-mig-manager", {"migManager": {"enabled": False}}),
        ("state-node-status-exporter", {"nodeStatusExporter": {"enabled": False}}),
        ("state-driver", {"driver": {"enabled": False}}),
    ],
)
def test_disabled_operands_are_not_enabled_and_render_nothing(
    name: str, spec: dict[str, Any]
) -> None:
    op = operand(name)
    assert op.enabled(policy(spec)) is False
    assert op.render(policy(spec), view()) == Rendered()
