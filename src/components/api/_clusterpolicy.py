"""`ClusterPolicy` (`nvidia.com/v1`, cluster-scoped): the whole GPU stack in one object.

Field names, enums, limits and CRD defaults follow the reference's
`api/nvidia/v1/clusterpolicy_types.go`. The container-workload sections are fully typed;
the sandbox / vGPU / GPUDirect-storage sections are accepted and kept exactly as given.
Python defaults (when a field is absent) follow the reference's `IsEnabled()` helpers and
Helm values.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, crd_default
from components.api._common import (
    ComponentSpec,
    ContainerProbeSpec,
    EnvVar,
    GPUDirectRDMASpec,
    ImageSpec,
    Int32,
    NameRef,
    ObjectMeta,
    Preserved,
    StringMap,
    Toleration,
    preserved,
)
from components.api._status import ClusterPolicyStatus
from components.api._upgrade import CountOrPercent, DriverUpgradePolicySpec

GROUP = "nvidia.com"
CLUSTER_POLICY_VERSION = "v1"
CLUSTER_POLICY_API_VERSION = f"{GROUP}/{CLUSTER_POLICY_VERSION}"

Runtime = Literal["docker", "crio", "containerd"]
MIGStrategy = Literal["none", "single", "mixed"]
KernelModuleType = Literal["auto", "open", "proprietary"]

#: An absolute path on the host.
_ABSOLUTE_PATH = r"^/"
#: prometheus-operator's Duration (`30s`, `1m30s`, `0`).
_DURATION_PATTERN = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
    r"(([0-9]+)ms)?)$"
)

RelabelAction = Literal[
    "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
    "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
    "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
    "dropequal", "DropEqual",
]  # fmt: skip


def _set(data: dict[str, Any], key: str) -> bool:
    value = data.get(key)
    return value is not None and value != ""


def _precompiled_without_digest(data: dict[str, Any]) -> bool:
    version = data.get("version")
    return not (
        data.get("usePrecompiled") is True
        and isinstance(version, str)
        and version.startswith("sha256:")
    )


#: Shared by `ClusterPolicy.spec.driver` and `NVIDIADriver.spec`.
PRECOMPILED_NO_DIGEST = Cel(
    rule=(
        "!(has(self.usePrecompiled) && self.usePrecompiled && has(self.version) && "
        "self.version.startsWith('sha256:'))"
    ),
    message=(
        "a sha256 digest cannot be the version when usePrecompiled is true: precompiled "
        "images are picked per kernel, so the version must be a driver branch or version"
    ),
    check=_precompiled_without_digest,
    field_path=".version",
    reason="FieldValueInvalid",
)


# --- operator, daemonsets, host paths -------------------------------------------------


class OperatorSpec(ApiModel):
    """Settings for the operator itself."""

    default_runtime: Runtime = crd_default(
        "docker", description="Container runtime used when a node's cannot be detected."
    )
    runtime_class: str = crd_default("nvidia", description="RuntimeClass for GPU pods.")
    init_container: ImageSpec = Field(
        default_factory=ImageSpec, description="Image used by operands' init containers."
    )
    labels: StringMap = Field(default_factory=dict, description="Labels for the operator's pods.")
    annotations: StringMap = Field(
        default_factory=dict, description="Annotations for the operator's pods."
    )
    use_ocp_driver_toolkit: bool = Field(
        default=False,
        alias="use_ocp_driver_toolkit",
        description="On OpenShift, build the driver with the Driver Toolkit image.",
    )


class RollingUpdateSpec(ApiModel):
    """Rolling update settings for every operand DaemonSet."""

    max_unavailable: CountOrPercent = Field(
        default="1", description="Nodes whose operand pods may be updated at once."
    )


class DaemonsetsSpec(ApiModel):
    """Settings shared by every operand DaemonSet."""

    labels: StringMap = Field(default_factory=dict, description="Labels for operand pods.")
    annotations: StringMap = Field(
        default_factory=dict, description="Annotations for operand pods."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Tolerations for operand pods."
    )
    priority_class_name: str = Field(default="", description="PriorityClass of operand pods.")
    update_strategy: Literal["RollingUpdate", "OnDelete"] = crd_default(
        "RollingUpdate", description="Update strategy of the operand DaemonSets (not the driver)."
    )
    rolling_update: RollingUpdateSpec = Field(default_factory=RollingUpdateSpec)


class HostPathsSpec(ApiModel):
    """Paths on the host that operands use."""

    root_fs: str = Field(
        default="/",
        alias="rootFS",
        pattern=_ABSOLUTE_PATH,
        description="The host's root filesystem (chroot-able).",
    )
    driver_install_dir: str = Field(
        default="/run/nvidia/driver",
        pattern=_ABSOLUTE_PATH,
        description="Where the driver's files (libraries, binaries) are on the host.",
    )


# --- driver ---------------------------------------------------------------------------


class DriverManagerSpec(ImageSpec):
    """The k8s-driver-manager init container of the driver pods."""

    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")


class DriverRepoConfigSpec(ApiModel):
    """A ConfigMap with package repository configuration for the driver container."""

    config_map_name: str = ""


class DriverLicensingConfigSpec(ApiModel):
    """vGPU guest driver licensing."""

    config_map_name: str = Field(default="", description="Deprecated: use secretName.")
    secret_name: str = Field(default="", description="Secret with the licensing token.")
    nls_enabled: bool = Field(default=False, description="Use NVIDIA License System.")


class VirtualTopologyConfigSpec(ApiModel):
    """vGPU topology daemon configuration."""

    config: str = ""


class DriverSpec(ComponentSpec):
    """The NVIDIA driver DaemonSet(s)."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (PRECOMPILED_NO_DIGEST,)

    enabled: bool = Field(default=True, description="Deploy the driver.")
    use_nvidia_driver_crd: bool = Field(
        default=False,
        alias="useNvidiaDriverCRD",
        description="Drivers are deployed per node pool by NVIDIADriver resources instead.",
    )
    use_precompiled: bool = Field(
        default=False, description="Use precompiled driver images (one DaemonSet per kernel)."
    )
    use_open_kernel_modules: bool = Field(
        default=False, description="Deprecated: use kernelModuleType."
    )
    kernel_module_type: KernelModuleType = crd_default(
        "auto", description="Kernel modules: auto (recommended for the GPU), open, proprietary."
    )
    startup_probe: ContainerProbeSpec | None = None
    liveness_probe: ContainerProbeSpec | None = None
    readiness_probe: ContainerProbeSpec | None = None
    rdma: GPUDirectRDMASpec = Field(default_factory=GPUDirectRDMASpec)
    upgrade_policy: DriverUpgradePolicySpec = Field(default_factory=DriverUpgradePolicySpec)
    manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)
    repo_config: DriverRepoConfigSpec = Field(default_factory=DriverRepoConfigSpec)
    cert_config: NameRef = Field(default_factory=NameRef)
    licensing_config: DriverLicensingConfigSpec = Field(default_factory=DriverLicensingConfigSpec)
    virtual_topology: VirtualTopologyConfigSpec = Field(default_factory=VirtualTopologyConfigSpec)
    kernel_module_config: NameRef = Field(default_factory=NameRef)
    secret_env: str = Field(default="", description="Secret with extra environment variables.")


# --- toolkit, device plugin, DCGM, GFD, MIG --------------------------------------------


class ToolkitSpec(ComponentSpec):
    """The NVIDIA Container Toolkit DaemonSet."""

    enabled: bool = Field(default=True, description="Deploy the container toolkit.")
    install_dir: str = crd_default(
        "/usr/local/nvidia", pattern=_ABSOLUTE_PATH, description="Install directory on the host."
    )


def _config_default_needs_name(data: dict[str, Any]) -> bool:
    return not _set(data, "default") or _set(data, "name")


class DevicePluginConfig(ApiModel):
    """A ConfigMap of device plugin (and GFD) configurations."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (
        Cel(
            rule="!has(self.default) || self.default == '' || (has(self.name) && self.name != '')",
            message="default names a configuration inside a ConfigMap, so name must be set too",
            check=_config_default_needs_name,
            field_path=".name",
            reason="FieldValueRequired",
        ),
    )

    name: str = Field(default="", description="The ConfigMap's name.")
    default: str = Field(default="", description="The configuration used when a node names none.")


class MPSConfig(ApiModel):
    """CUDA MPS settings of the device plugin."""

    root: str = crd_default(
        "/run/nvidia/mps", pattern=_ABSOLUTE_PATH, description="MPS root path on the host."
    )


class DevicePluginSpec(ComponentSpec):
    """The NVIDIA device plugin DaemonSet."""

    enabled: bool = Field(default=True, description="Deploy the device plugin.")
    config: DevicePluginConfig = Field(default_factory=DevicePluginConfig)
    mps: MPSConfig = Field(default_factory=MPSConfig)


class DCGMSpec(ComponentSpec):
    """The standalone DCGM host engine DaemonSet."""

    enabled: bool = Field(default=True, description="Deploy DCGM as its own pod.")
    host_port: Int32 = Field(default=5555, description="Deprecated: host port of DCGM.")


class DCGMExporterMetricsConfig(ApiModel):
    """A ConfigMap with the metrics DCGM exporter collects (dcgm-metrics.csv)."""

    name: str = ""


class RelabelConfig(ApiModel):
    """A Prometheus relabeling rule."""

    source_labels: list[str] = Field(default_factory=list)
    separator: str = ""
    target_label: str = ""
    regex: str = ""
    modulus: int | None = Field(default=None, ge=0)
    replacement: str = ""
    action: RelabelAction = crd_default("replace")


class DCGMExporterServiceMonitorConfig(ApiModel):
    """A prometheus-operator ServiceMonitor for DCGM exporter."""

    enabled: bool = Field(default=False, description="Create the ServiceMonitor.")
    interval: str = Field(
        default="",
        pattern=_DURATION_PATTERN,
        description="Scrape interval (e.g. 15s); empty uses Prometheus' global one.",
    )
    honor_labels: bool = False
    additional_labels: StringMap = Field(default_factory=dict)
    relabelings: list[RelabelConfig] = Field(default_factory=list)


class DCGMExporterServiceConfig(ApiModel):
    """The Service in front of DCGM exporter."""

    type: str = Field(default="", description="Service type (ClusterIP when empty).")
    internal_traffic_policy: str = ""


class DCGMExporterHPCJobMappingConfig(ApiModel):
    """HPC job mapping for DCGM exporter."""

    enabled: bool = False
    directory: str = "/var/lib/dcgm-exporter/job-mapping"


class DCGMExporterSpec(ComponentSpec):
    """The DCGM exporter DaemonSet (GPU metrics for Prometheus)."""

    enabled: bool = Field(default=True, description="Deploy DCGM exporter.")
    pod_annotations: StringMap = Field(default_factory=dict)
    pod_labels: StringMap = Field(default_factory=dict)
    config: DCGMExporterMetricsConfig = Field(default_factory=DCGMExporterMetricsConfig)
    service_monitor: DCGMExporterServiceMonitorConfig = Field(
        default_factory=DCGMExporterServiceMonitorConfig
    )
    service: DCGMExporterServiceConfig = Field(default_factory=DCGMExporterServiceConfig)
    host_pid: bool = Field(default=False, alias="hostPID")
    host_network: bool = False
    hpc_job_mapping: DCGMExporterHPCJobMappingConfig = Field(
        default_factory=DCGMExporterHPCJobMappingConfig
    )


class GPUFeatureDiscoverySpec(ComponentSpec):
    """The GPU feature discovery DaemonSet (GPU node labels)."""

    enabled: bool = Field(default=True, description="Deploy GPU feature discovery.")


class MIGSpec(ApiModel):
    """How MIG devices are exposed."""

    strategy: MIGStrategy = Field(
        default="none",
        description="none, single (MIG devices as nvidia.com/gpu), mixed (nvidia.com/mig-*).",
    )


class MIGPartedConfigSpec(ApiModel):
    """The mig-parted configuration ConfigMap of the MIG manager."""

    name: str = crd_default("default-mig-parted-config", description="The ConfigMap's name.")
    default: Literal["all-disabled", ""] = crd_default(
        "all-disabled", description="MIG config for nodes without nvidia.com/mig.config."
    )

    @property
    def config_map_name(self) -> str:
        """The ConfigMap to use (an empty name means the default one)."""
        return self.name or "default-mig-parted-config"


class MIGGPUClientsConfigSpec(ApiModel):
    """The gpu-clients ConfigMap of the MIG manager."""

    name: str = ""


class MIGManagerSpec(ComponentSpec):
    """The MIG manager DaemonSet (MIG-capable nodes only)."""

    enabled: bool = Field(default=True, description="Deploy the MIG manager.")
    config: MIGPartedConfigSpec = Field(default_factory=MIGPartedConfigSpec)
    gpu_clients_config: MIGGPUClientsConfigSpec = Field(default_factory=MIGGPUClientsConfigSpec)


class NodeStatusExporterSpec(ComponentSpec):
    """The node status exporter DaemonSet."""

    enabled: bool = Field(default=False, description="Deploy the node status exporter.")


# --- validator, PSA, CDI -------------------------------------------------------------


class EnvOnly(ApiModel):
    """Extra environment variables for one validation step."""

    env: list[EnvVar] = Field(default_factory=list)


class ValidatorSpec(ComponentSpec):
    """The operator validator DaemonSet (checks each layer on each node)."""

    plugin: EnvOnly = Field(default_factory=EnvOnly)
    toolkit: EnvOnly = Field(default_factory=EnvOnly)
    driver: EnvOnly = Field(default_factory=EnvOnly)
    cuda: EnvOnly = Field(default_factory=EnvOnly)
    vfio_pci: EnvOnly = Field(default_factory=EnvOnly, alias="vfioPCI")
    vgpu_manager: EnvOnly = Field(default_factory=EnvOnly)
    vgpu_devices: EnvOnly = Field(default_factory=EnvOnly)


class PSASpec(ApiModel):
    """Pod Security Admission labels on the operator namespace."""

    enabled: bool = False


class CDIConfigSpec(ApiModel):
    """The Container Device Interface."""

    enabled: bool = crd_default(True, description="Use CDI to give containers their GPUs.")
    default: bool = crd_default(False, description="Deprecated: no longer used.")
    nri_plugin_enabled: bool = crd_default(
        False, description="Inject CDI devices into management containers with an NRI plugin."
    )


# --- the policy -----------------------------------------------------------------------


class ClusterPolicySpec(ApiModel):
    """The desired GPU stack."""

    operator: OperatorSpec = Field(default_factory=OperatorSpec)
    daemonsets: DaemonsetsSpec = Field(default_factory=DaemonsetsSpec)
    driver: DriverSpec = Field(default_factory=DriverSpec)
    toolkit: ToolkitSpec = Field(default_factory=ToolkitSpec)
    device_plugin: DevicePluginSpec = Field(default_factory=DevicePluginSpec)
    dcgm: DCGMSpec = Field(default_factory=DCGMSpec)
    dcgm_exporter: DCGMExporterSpec = Field(default_factory=DCGMExporterSpec)
    gfd: GPUFeatureDiscoverySpec = Field(default_factory=GPUFeatureDiscoverySpec)
    mig: MIGSpec = Field(default_factory=MIGSpec)
    mig_manager: MIGManagerSpec = Field(default_factory=MIGManagerSpec)
    node_status_exporter: NodeStatusExporterSpec = Field(default_factory=NodeStatusExporterSpec)
    validator: ValidatorSpec = Field(default_factory=ValidatorSpec)
    psa: PSASpec = Field(default_factory=PSASpec)
    cdi: CDIConfigSpec = Field(default_factory=CDIConfigSpec)
    host_paths: HostPathsSpec = Field(default_factory=HostPathsSpec)
    # Kept as given (accepted, stored, round-tripped; not acted on yet).
    psp: Preserved = preserved()
    sandbox_workloads: Preserved = preserved()
    vgpu_manager: Preserved = preserved()
    vgpu_device_manager: Preserved = preserved()
    vfio_manager: Preserved = preserved()
    sandbox_device_plugin: Preserved = preserved()
    kata_manager: Preserved = preserved()
    cc_manager: Preserved = preserved()
    gds: Preserved = preserved()
    gdrcopy: Preserved = preserved()


class ClusterPolicy(ApiModel):
    """A ClusterPolicy: the GPU stack the operator keeps on every GPU node."""

    api_version: Literal["nvidia.com/v1"] = "nvidia.com/v1"
    kind: Literal["ClusterPolicy"] = "ClusterPolicy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterPolicySpec = Field(default_factory=ClusterPolicySpec)
    status: ClusterPolicyStatus | None = None
