"""`ClusterPolicy` (`nvidia.com/v1`, cluster-scoped): the whole GPU stack in one object.

Field names, enums, limits and CRD defaults follow the reference's
`api/nvidia/v1/clusterpolicy_types.go`. Every section is typed; the sandbox / vGPU /
GPUDirect-storage ones live in `_sandbox` (the sandbox ones drive the VM operands, `gds`
and `gdrcopy` the driver pod's sidecars; what no operand acts on yet: see `_unsupported`).
Python defaults (when a field is absent) follow the reference's `IsEnabled()` helpers and
Helm values.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, crd_default
from components.api._common import (
    EnvVar,
    ImageSpec,
    Int32,
    ObjectMeta,
    OperandSpec,
    StringMap,
    Toleration,
)
from components.api._core import PodSecurityContext
from components.api._driver import DriverSpec
from components.api._monitoring import (
    OperatorMetricsSpec,
    ServiceMonitorConfig,
)
from components.api._remediation import RemediationSpec
from components.api._sandbox import (
    CCManagerSpec,
    DriverSideSpec,
    KataManagerSpec,
    PSPSpec,
    SandboxDevicePluginSpec,
    SandboxWorkloadsSpec,
    VFIOManagerSpec,
    VGPUDeviceManagerSpec,
    VGPUManagerSpec,
)
from components.api._status import ClusterPolicyStatus
from components.api._upgrade import CountString

GROUP = "nvidia.com"
CLUSTER_POLICY_VERSION = "v1"
CLUSTER_POLICY_API_VERSION = f"{GROUP}/{CLUSTER_POLICY_VERSION}"

#: The runtimes the toolkit can configure (`operator.defaultRuntime` is any string).
Runtime = Literal["docker", "crio", "containerd"]
MIGStrategy = Literal["none", "single", "mixed"]

#: An absolute path on the host.
_ABSOLUTE_PATH = r"^/"
#: The runtime assumed when no GPU node says which one it runs (the reference's too).
DEFAULT_RUNTIME = "containerd"


def _set(data: dict[str, Any], key: str) -> bool:
    value = data.get(key)
    return value is not None and value != ""


# --- operator, daemonsets, host paths -------------------------------------------------


class OperatorSpec(ApiModel):
    """Settings for the operator itself."""

    default_runtime: str = Field(
        default=DEFAULT_RUNTIME,
        description=(
            "Container runtime assumed when no GPU node reports one (containerd when unset)."
        ),
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
    metrics: OperatorMetricsSpec = Field(default_factory=OperatorMetricsSpec)


class RollingUpdateSpec(ApiModel):
    """Rolling update settings for every operand DaemonSet."""

    max_unavailable: CountString = Field(
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
    pod_security_context: PodSecurityContext | None = Field(
        default=None, description="Security context of every operand pod."
    )


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
    kubelet_root_dir: str = crd_default(
        "/var/lib/kubelet", description="The kubelet's root directory on the host."
    )


# --- toolkit, device plugin, DCGM, GFD, MIG --------------------------------------------


class ToolkitSpec(OperandSpec):
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


class DevicePluginSpec(OperandSpec):
    """The NVIDIA device plugin DaemonSet."""

    enabled: bool = Field(default=True, description="Deploy the device plugin.")
    config: DevicePluginConfig = Field(default_factory=DevicePluginConfig)
    mps: MPSConfig = Field(default_factory=MPSConfig)


class DCGMSpec(OperandSpec):
    """The standalone DCGM host engine DaemonSet."""

    enabled: bool = Field(default=True, description="Deploy DCGM as its own pod.")
    host_port: Int32 = Field(default=5555, description="Deprecated: host port of DCGM.")


class DCGMExporterMetricsConfig(ApiModel):
    """A ConfigMap with the metrics DCGM exporter collects (dcgm-metrics.csv)."""

    name: str = ""


class DCGMExporterServiceMonitorConfig(ServiceMonitorConfig):
    """A prometheus-operator ServiceMonitor for DCGM exporter."""


class DCGMExporterServiceConfig(ApiModel):
    """The Service in front of DCGM exporter."""

    type: str = Field(default="", description="Service type (ClusterIP when empty).")
    internal_traffic_policy: str = ""


class DCGMExporterHPCJobMappingConfig(ApiModel):
    """HPC job mapping for DCGM exporter."""

    enabled: bool = False
    directory: str = "/var/lib/dcgm-exporter/job-mapping"


class DCGMExporterSpec(OperandSpec):
    """The DCGM exporter DaemonSet (GPU metrics for Prometheus)."""

    enabled: bool = Field(default=True, description="Deploy DCGM exporter.")
    pod_annotations: StringMap = Field(default_factory=dict)
    pod_labels: StringMap = Field(default_factory=dict)
    annotations: StringMap = Field(default_factory=dict)
    enable_pod_labels: bool = Field(default=False, description="Label metrics with pod labels.")
    enable_pod_uid: bool = Field(
        default=False, alias="enablePodUID", description="Label metrics with the pod's UID."
    )
    pod_label_allowlist_regex: list[str] = Field(
        default_factory=list, description="Pod labels (regexes) that may become metric labels."
    )
    config: DCGMExporterMetricsConfig = Field(default_factory=DCGMExporterMetricsConfig)
    service_monitor: DCGMExporterServiceMonitorConfig = Field(
        default_factory=DCGMExporterServiceMonitorConfig
    )
    service: DCGMExporterServiceConfig = Field(default_factory=DCGMExporterServiceConfig)
    host_pid: bool = Field(default=False, alias="hostPID")
    hpc_job_mapping: DCGMExporterHPCJobMappingConfig = Field(
        default_factory=DCGMExporterHPCJobMappingConfig
    )


class GPUFeatureDiscoverySpec(OperandSpec):
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

    name: str = Field(default="", description="The ConfigMap's name; empty: the built-in one.")
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


class MIGPodDeletionSpec(ApiModel):
    """Ours (the reference's MIG manager evicts no user pod): which GPU pods a MIG change
    may evict beyond kubectl drain's rules, under the driver upgrade's podDeletion names.
    Without them a GPU pod no controller manages, or one with emptyDir data, holds the
    node's change and nothing on the node is evicted."""

    force: bool = Field(
        default=False,
        description="Evict GPU pods not managed by a controller too (nothing recreates them).",
    )
    delete_empty_dir: bool = Field(
        default=False, description="Evict GPU pods that use emptyDir volumes (their data is lost)."
    )


class MIGManagerSpec(OperandSpec):
    """The MIG manager DaemonSet (MIG-capable nodes only)."""

    enabled: bool = Field(default=True, description="Deploy the MIG manager.")
    config: MIGPartedConfigSpec = Field(default_factory=MIGPartedConfigSpec)
    gpu_clients_config: MIGGPUClientsConfigSpec = Field(default_factory=MIGGPUClientsConfigSpec)
    pod_deletion: MIGPodDeletionSpec = Field(default_factory=MIGPodDeletionSpec)


class NodeStatusExporterSpec(OperandSpec):
    """The node status exporter DaemonSet."""

    enabled: bool = Field(default=False, description="Deploy the node status exporter.")


# --- validator, PSA, CDI -------------------------------------------------------------


class NodeAgentSpec(OperandSpec):
    """The node agent (this operator's own; the reference has none): on every GPU node it
    reads the GPUs through NVML and publishes the node's GPUDriverReady, GPUHealthy and
    GPUValidated conditions, its GPU processes and `gpu_operator_node_*` metrics. Its image
    is the operator's own (`gpu-operator node-agent`)."""

    enabled: bool = Field(default=False, description="Deploy the node agent.")
    interval_seconds: Int32 = Field(
        default=15,
        ge=1,
        description="How often the agent looks at the GPUs (an XID is published at once).",
    )


class EnvOnly(ApiModel):
    """Extra environment variables for one validation step."""

    env: list[EnvVar] = Field(default_factory=list)


class ValidatorSpec(OperandSpec):
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
    node_agent: NodeAgentSpec = Field(default_factory=NodeAgentSpec)
    remediation: RemediationSpec = Field(default_factory=RemediationSpec)  # ours
    validator: ValidatorSpec = Field(default_factory=ValidatorSpec)
    psa: PSASpec = Field(default_factory=PSASpec)
    cdi: CDIConfigSpec = Field(default_factory=CDIConfigSpec)
    host_paths: HostPathsSpec = Field(default_factory=HostPathsSpec)
    # The sandbox (VM) sections drive the VM operands, gds and gdrcopy the driver's
    # sidecars; PSP is typed and checked, not acted on (see `_unsupported`).
    psp: PSPSpec = Field(default_factory=PSPSpec)
    sandbox_workloads: SandboxWorkloadsSpec = Field(default_factory=SandboxWorkloadsSpec)
    vgpu_manager: VGPUManagerSpec = Field(default_factory=VGPUManagerSpec)
    vgpu_device_manager: VGPUDeviceManagerSpec = Field(default_factory=VGPUDeviceManagerSpec)
    vfio_manager: VFIOManagerSpec = Field(default_factory=VFIOManagerSpec)
    sandbox_device_plugin: SandboxDevicePluginSpec = Field(default_factory=SandboxDevicePluginSpec)
    kata_sandbox_device_plugin: SandboxDevicePluginSpec = Field(
        default_factory=SandboxDevicePluginSpec
    )
    kata_manager: KataManagerSpec = Field(default_factory=KataManagerSpec)
    cc_manager: CCManagerSpec = Field(default_factory=CCManagerSpec)
    gds: DriverSideSpec = Field(default_factory=DriverSideSpec)
    gdrcopy: DriverSideSpec = Field(default_factory=DriverSideSpec)


class ClusterPolicy(ApiModel):
    """A ClusterPolicy: the GPU stack the operator keeps on every GPU node."""

    api_version: Literal["nvidia.com/v1"] = "nvidia.com/v1"
    kind: Literal["ClusterPolicy"] = "ClusterPolicy"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ClusterPolicySpec = Field(default_factory=ClusterPolicySpec)
    status: ClusterPolicyStatus | None = None
