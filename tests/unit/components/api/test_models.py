"""The models: samples parse and round-trip, defaults are the reference's, names are its."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from components.api import (
    ClusterPolicy,
    ClusterPolicySpec,
    DriverUpgradePolicySpec,
    GPUCluster,
    NVIDIADriver,
    NVIDIADriverSpec,
)
from tests.unit.components.api.cases import COMPAT, COMPAT_FILES, SAMPLE_FILES, VALID, load_all

pytestmark = pytest.mark.unit

MODELS: dict[str, type[ClusterPolicy] | type[NVIDIADriver] | type[GPUCluster]] = {
    "ClusterPolicy": ClusterPolicy,
    "NVIDIADriver": NVIDIADriver,
    "GPUCluster": GPUCluster,
}


def parse(document: dict[str, Any]) -> ClusterPolicy | NVIDIADriver | GPUCluster:
    return MODELS[document["kind"]].from_dict(document)


def test_the_reference_samples_are_there() -> None:
    assert [p.name for p in COMPAT_FILES] == [
        "nvidia-clusterpolicy-sample.yaml",
        "nvidia-gpucluster-sample.yaml",
        "nvidia-nvidiadriver-sample.yaml",
    ]


@pytest.mark.parametrize("path", COMPAT_FILES + SAMPLE_FILES, ids=lambda p: Path(p).name)
def test_samples_round_trip_without_losing_a_field(path: Path) -> None:
    for document in load_all(path):
        original = copy.deepcopy(document)
        assert parse(document).to_dict() == original
        assert document == original  # parsing does not touch its input


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
def test_valid_documents_round_trip(case: Any) -> None:
    assert parse(case.document).to_dict() == case.document


def test_reference_sample_reads_typed() -> None:
    (document,) = load_all(COMPAT / "nvidia-clusterpolicy-sample.yaml")
    policy = ClusterPolicy.from_dict(document)
    spec = policy.spec
    assert policy.metadata.name == "gpu-cluster-policy"
    assert spec.operator.runtime_class == "nvidia"
    assert spec.operator.use_ocp_driver_toolkit is True
    assert spec.mig.strategy == "single"
    assert spec.driver.upgrade_policy.auto_upgrade is True
    assert spec.driver.upgrade_policy.pod_deletion.timeout_seconds == 300
    assert spec.driver.licensing_config.nls_enabled is True
    assert spec.node_status_exporter.enabled is False
    assert spec.validator.env[0].name == "WITH_WORKLOAD"
    # `plugin:` with no value is null: it reads as an empty section, and is written back null.
    assert spec.validator.plugin.env == []
    assert policy.to_dict()["spec"]["validator"]["plugin"] is None
    # The sandbox sections are typed too, and written back exactly as given.
    assert spec.sandbox_workloads.default_workload == "container"
    assert spec.sandbox_workloads.mode == "kubevirt"  # the default
    assert spec.psp.enabled is False
    assert spec.kata_manager.enabled is False
    assert spec.kata_manager.config.runtime_classes == []
    written = policy.to_dict()["spec"]
    assert written["sandboxWorkloads"] == {"enabled": False, "defaultWorkload": "container"}
    assert written["kataManager"] == {"enabled": False, "config": {}}


def test_nvidiadriver_sample_reads_typed() -> None:
    (document,) = load_all(COMPAT / "nvidia-nvidiadriver-sample.yaml")
    spec = NVIDIADriver.from_dict(document).spec
    assert spec.driver_type == "gpu"
    assert spec.use_precompiled is False
    assert spec.upgrade_policy.max_unavailable == "25%"
    assert spec.upgrade_policy.wait_for_completion.pod_selector == ""
    assert spec.licensing_config.secret_name == ""


def test_defaults_are_the_references_when_sections_are_absent() -> None:
    spec = ClusterPolicySpec()
    enabled = {
        "driver": spec.driver.enabled,
        "toolkit": spec.toolkit.enabled,
        "devicePlugin": spec.device_plugin.enabled,
        "dcgm": spec.dcgm.enabled,
        "dcgmExporter": spec.dcgm_exporter.enabled,
        "gfd": spec.gfd.enabled,
        "migManager": spec.mig_manager.enabled,
        "nodeStatusExporter": spec.node_status_exporter.enabled,
        "psa": spec.psa.enabled,
        "cdi": spec.cdi.enabled,
        "serviceMonitor": spec.dcgm_exporter.service_monitor.enabled,
        "rdma": spec.driver.rdma.enabled,
    }
    assert enabled == {
        "driver": True,
        "toolkit": True,
        "devicePlugin": True,
        "dcgm": True,
        "dcgmExporter": True,
        "gfd": True,
        "migManager": True,
        "nodeStatusExporter": False,
        "psa": False,
        "cdi": True,
        "serviceMonitor": False,
        "rdma": False,
    }
    assert spec.operator.default_runtime == "containerd"  # no CRD default, as the reference
    assert spec.mig_manager.config.name == ""  # the built-in config
    assert spec.mig_manager.config.config_map_name == "default-mig-parted-config"
    assert spec.host_paths.kubelet_root_dir == "/var/lib/kubelet"
    assert spec.operator.runtime_class == "nvidia"
    assert spec.daemonsets.update_strategy == "RollingUpdate"
    assert spec.daemonsets.rolling_update.max_unavailable == "1"
    assert spec.driver.kernel_module_type == "auto"
    assert spec.driver.use_precompiled is False
    assert spec.driver.use_nvidia_driver_crd is False
    assert spec.toolkit.install_dir == "/usr/local/nvidia"
    assert spec.device_plugin.mps.root == "/run/nvidia/mps"
    assert spec.mig.strategy == "none"
    assert spec.mig_manager.config.config_map_name == "default-mig-parted-config"
    assert spec.mig_manager.config.default == "all-disabled"
    assert spec.host_paths.root_fs == "/"
    assert spec.host_paths.driver_install_dir == "/run/nvidia/driver"
    assert spec.driver.licensing_config.nls_enabled is False


def test_upgrade_policy_defaults() -> None:
    policy = DriverUpgradePolicySpec()
    assert policy.auto_upgrade is False  # the reference's CRD default for ClusterPolicy
    assert policy.max_parallel_upgrades == 1
    assert policy.max_unavailable == "25%"
    assert (policy.pod_deletion.force, policy.pod_deletion.timeout_seconds) == (False, 300)
    assert policy.pod_deletion.delete_empty_dir is False
    assert policy.wait_for_completion.timeout_seconds == 0
    assert policy.wait_for_completion.pod_selector == ""
    drain = policy.drain
    assert (drain.enable, drain.force, drain.timeout_seconds, drain.delete_empty_dir) == (
        False,
        False,
        300,
        False,
    )
    # An NVIDIADriver upgrades automatically unless told otherwise, as the reference's does.
    assert NVIDIADriverSpec().upgrade_policy.auto_upgrade is True
    assert NVIDIADriverSpec().licensing_config.nls_enabled is True
    assert NVIDIADriverSpec().image == "nvcr.io/nvidia/driver"


def test_defaults_are_not_written_back() -> None:
    policy = ClusterPolicy.from_dict(
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"}}
    )
    assert policy.to_dict() == {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "p"},
    }
    full = policy.to_dict(defaults=True)
    assert full["spec"]["driver"]["upgradePolicy"]["maxUnavailable"] == "25%"
    assert full["spec"]["hostPaths"]["rootFS"] == "/"


@pytest.mark.parametrize(
    ("wire", "read"),
    [
        (
            {"operator": {"use_ocp_driver_toolkit": True}},
            lambda s: s.operator.use_ocp_driver_toolkit,
        ),
        ({"hostPaths": {"rootFS": "/host"}}, lambda s: s.host_paths.root_fs == "/host"),
        ({"dcgmExporter": {"hostPID": True}}, lambda s: s.dcgm_exporter.host_pid),
        ({"driver": {"useNvidiaDriverCRD": True}}, lambda s: s.driver.use_nvidia_driver_crd),
        ({"validator": {"vfioPCI": {"env": [{"name": "A"}]}}}, lambda s: s.validator.vfio_pci.env),
        ({"driver": {"rdma": {"useHostMofed": True}}}, lambda s: s.driver.rdma.use_host_mofed),
        (
            {"migManager": {"gpuClientsConfig": {"name": "c"}}},
            lambda s: s.mig_manager.gpu_clients_config.name == "c",
        ),
    ],
)
def test_wire_names_are_the_references(wire: dict[str, Any], read: Any) -> None:
    spec = ClusterPolicySpec.from_dict(wire)
    assert read(spec)
    assert spec.to_dict() == wire


def test_python_names_work_too_and_write_camel_case() -> None:
    spec = ClusterPolicySpec(device_plugin={"enabled": False})  # type: ignore[arg-type]
    assert spec.to_dict() == {"devicePlugin": {"enabled": False}}


def test_unknown_fields_are_kept() -> None:
    wire = {"driver": {"futureField": {"x": 1}, "upgradePolicy": {"newKnob": True}}}
    assert ClusterPolicySpec.from_dict(wire).to_dict() == wire


@pytest.mark.parametrize(
    "wire",
    [
        {"mig": {"strategy": "weird"}},
        {"devicePlugin": {"enabled": "yes"}},
        {"driver": {"version": 535}},
        {"driver": {"upgradePolicy": {"maxParallelUpgrades": -1}}},
        {"driver": {"upgradePolicy": {"maxUnavailable": "abc"}}},
        {"driver": {"upgradePolicy": {"maxUnavailable": True}}},
        {"driver": {"usePrecompiled": True, "version": "sha256:abc"}},
        {"driver": {"resources": {"limits": {"cpu": "lots"}}}},
    ],
)
def test_parsing_is_as_strict_as_the_crd(wire: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ClusterPolicySpec.from_dict(wire)


def test_default_nvidiadriver_with_node_selector_does_not_parse() -> None:
    with pytest.raises(ValidationError, match="must not use nodeSelector"):
        NVIDIADriverSpec.from_dict({"default": True, "nodeSelector": {"a": "b"}})
    assert NVIDIADriverSpec.from_dict({"default": False, "nodeSelector": {"a": "b"}}).node_selector


def test_resources_take_quantities() -> None:
    spec = ClusterPolicySpec.from_dict(
        {"driver": {"resources": {"limits": {"cpu": 2, "memory": "1Gi"}, "requests": {}}}}
    )
    assert spec.driver.resources.limits == {"cpu": 2, "memory": "1Gi"}


def test_gpucluster_sample_reads_typed() -> None:
    (document,) = load_all(COMPAT / "nvidia-gpucluster-sample.yaml")
    cluster = GPUCluster.from_dict(document)
    dra = cluster.spec.dra_driver
    assert cluster.metadata.name == "gpu-cluster"
    assert (dra.repository, dra.image, dra.version) == (
        "registry.k8s.io/dra-driver-nvidia",
        "dra-driver-nvidia-gpu",
        "v0.4.0",
    )
    assert dra.compute_domains.enabled is True
    assert dra.gpus.kubelet_plugin.env == []
    assert cluster.spec.dcgm.enabled is False
    assert cluster.spec.dcgm_exporter.service_monitor.interval == "15s"
    assert cluster.spec.daemonsets.tolerations[0].key == "nvidia.com/gpu"
    assert cluster.spec.host_paths.kubelet_root_dir == "/var/lib/kubelet"


def test_a_gpucluster_needs_its_dra_driver_section_and_the_fixed_name() -> None:
    (document,) = load_all(COMPAT / "nvidia-gpucluster-sample.yaml")
    without = copy.deepcopy(document)
    del without["spec"]["draDriver"]
    with pytest.raises(ValidationError, match="draDriver"):
        GPUCluster.from_dict(without)
    renamed = copy.deepcopy(document)
    renamed["metadata"]["name"] = "second"
    with pytest.raises(ValidationError, match="only one GPUCluster per cluster"):
        GPUCluster.from_dict(renamed)


def test_the_dra_driver_defaults_are_the_crds() -> None:
    """What the reference's CRD fills in when a section is left out, Python assumes too."""
    spec = GPUCluster.from_dict(
        {"metadata": {"name": "gpu-cluster"}, "spec": {"draDriver": {}}}
    ).spec
    assert spec.dra_driver.compute_domains.enabled is True
    assert spec.host_paths.kubelet_root_dir == "/var/lib/kubelet"
    assert spec.daemonsets.update_strategy == "RollingUpdate"
