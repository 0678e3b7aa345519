"""The ClusterPolicy and NVIDIADriver API: typed models, CRDs, offline validation.

Parse what the API server (or a YAML file) gives, read typed fields with the reference's
defaults, write back without losing anything::

    policy = ClusterPolicy.from_dict(obj)          # camelCase dict in
    policy.spec.driver.upgrade_policy.max_parallel_upgrades   # 1 unless set
    policy.to_dict()                               # exactly what was given, back out

Images::

    operand_image(policy.spec, Operand.DEVICE_PLUGIN)     # nvcr.io/nvidia/k8s-device-plugin:v0.20.0
    driver_image(policy.spec.driver, os_id="ubuntu", os_version="22.04")
    # nvcr.io/nvidia/driver:595.91.07-ubuntu22.04

Status (the body of a status-subresource write)::

    status = ClusterPolicyStatus(state="notReady", namespace="gpu-operator")
    status.components = [ComponentStatus.build("state-driver", "notReady", ...)]
    status.mark_not_ready(Reason.DRIVER_NOT_READY, "driver not ready on 2 nodes")
    {"status": status.to_dict(defaults=True)}

CRDs: `crd(CLUSTER_POLICY)`, `render_all()`; offline checks: `validate_text(...)`.
"""

from components.api._active import active_cluster_policy, by_age
from components.api._affinity import (
    node_selector_terms_match,
    pod_spec_targets,
    template_pod_spec,
)
from components.api._base import ApiModel, Cel, crd_default
from components.api._clusterpolicy import (
    CLUSTER_POLICY_API_VERSION,
    PRECOMPILED_NO_DIGEST,
    CDIConfigSpec,
    ClusterPolicy,
    ClusterPolicySpec,
    DaemonsetsSpec,
    DCGMExporterMetricsConfig,
    DCGMExporterServiceConfig,
    DCGMExporterServiceMonitorConfig,
    DCGMExporterSpec,
    DCGMSpec,
    DevicePluginConfig,
    DevicePluginSpec,
    DriverLicensingConfigSpec,
    DriverManagerSpec,
    DriverRepoConfigSpec,
    DriverSpec,
    EnvOnly,
    GPUFeatureDiscoverySpec,
    HostPathsSpec,
    KernelModuleType,
    MIGGPUClientsConfigSpec,
    MIGManagerSpec,
    MIGPartedConfigSpec,
    MIGSpec,
    MIGStrategy,
    MPSConfig,
    NodeStatusExporterSpec,
    OperatorSpec,
    PSASpec,
    RelabelConfig,
    RollingUpdateSpec,
    Runtime,
    ToolkitSpec,
    ValidatorSpec,
    VirtualTopologyConfigSpec,
)
from components.api._common import (
    ComponentSpec,
    ContainerProbeSpec,
    EnvVar,
    GPUDirectRDMASpec,
    ImageSpec,
    NameRef,
    ObjectMeta,
    ResourceRequirements,
    Toleration,
)
from components.api._crd import (
    CLUSTER_POLICY,
    GROUP,
    KINDS,
    NVIDIA_DRIVER,
    Kind,
    crd,
    kind_for,
    render_all,
    write_all,
)
from components.api._images import (
    DEFAULT_IMAGES,
    ImageDefault,
    ImageError,
    Operand,
    driver_image,
    driver_manager_image,
    join_image,
    operand_image,
    os_tag,
    resolve_image,
)
from components.api._labels import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    MIG_CAPABLE_LABEL,
    NVIDIA_DRIVER_OWNER_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
)
from components.api._nvidiadriver import (
    NVIDIA_DRIVER_API_VERSION,
    DriverType,
    GDRCopySpec,
    GPUDirectStorageSpec,
    NVIDIADriver,
    NVIDIADriverSpec,
)
from components.api._status import (
    MAX_LISTED_NODES,
    ClusterPolicyStatus,
    ComponentState,
    ComponentStatus,
    Condition,
    ConditionType,
    NodeUpgradeStatus,
    NVIDIADriverStatus,
    Reason,
    UpgradeState,
    UpgradeStatus,
)
from components.api._text import names_and_more
from components.api._upgrade import (
    DrainSpec,
    DriverUpgradePolicySpec,
    NVIDIADriverUpgradePolicySpec,
    PodDeletionSpec,
    WaitForCompletionSpec,
    scaled_value,
)
from components.api._validate import (
    Problem,
    Report,
    YAMLProblem,
    load_documents,
    validate_document,
    validate_files,
    validate_text,
)

__all__ = [
    "CLUSTER_POLICY",
    "CLUSTER_POLICY_API_VERSION",
    "DEFAULT_IMAGES",
    "DRIVER_KERNEL_PIN_LABEL",
    "GROUP",
    "KERNEL_LABEL",
    "KINDS",
    "MAX_LISTED_NODES",
    "MIG_CAPABLE_LABEL",
    "NVIDIA_DRIVER",
    "NVIDIA_DRIVER_API_VERSION",
    "NVIDIA_DRIVER_OWNER_LABEL",
    "OS_ID_LABEL",
    "OS_VERSION_LABEL",
    "PRECOMPILED_NO_DIGEST",
    "ApiModel",
    "CDIConfigSpec",
    "Cel",
    "ClusterPolicy",
    "ClusterPolicySpec",
    "ClusterPolicyStatus",
    "ComponentSpec",
    "ComponentState",
    "ComponentStatus",
    "Condition",
    "ConditionType",
    "ContainerProbeSpec",
    "DCGMExporterMetricsConfig",
    "DCGMExporterServiceConfig",
    "DCGMExporterServiceMonitorConfig",
    "DCGMExporterSpec",
    "DCGMSpec",
    "DaemonsetsSpec",
    "DevicePluginConfig",
    "DevicePluginSpec",
    "DrainSpec",
    "DriverLicensingConfigSpec",
    "DriverManagerSpec",
    "DriverRepoConfigSpec",
    "DriverSpec",
    "DriverType",
    "DriverUpgradePolicySpec",
    "EnvOnly",
    "EnvVar",
    "GDRCopySpec",
    "GPUDirectRDMASpec",
    "GPUDirectStorageSpec",
    "GPUFeatureDiscoverySpec",
    "HostPathsSpec",
    "ImageDefault",
    "ImageError",
    "ImageSpec",
    "KernelModuleType",
    "Kind",
    "MIGGPUClientsConfigSpec",
    "MIGManagerSpec",
    "MIGPartedConfigSpec",
    "MIGSpec",
    "MIGStrategy",
    "MPSConfig",
    "NVIDIADriver",
    "NVIDIADriverSpec",
    "NVIDIADriverStatus",
    "NVIDIADriverUpgradePolicySpec",
    "NameRef",
    "NodeStatusExporterSpec",
    "NodeUpgradeStatus",
    "ObjectMeta",
    "Operand",
    "OperatorSpec",
    "PSASpec",
    "PodDeletionSpec",
    "Problem",
    "Reason",
    "RelabelConfig",
    "Report",
    "ResourceRequirements",
    "RollingUpdateSpec",
    "Runtime",
    "Toleration",
    "ToolkitSpec",
    "UpgradeState",
    "UpgradeStatus",
    "ValidatorSpec",
    "VirtualTopologyConfigSpec",
    "WaitForCompletionSpec",
    "YAMLProblem",
    "crd",
    "crd_default",
    "driver_image",
    "driver_manager_image",
    "join_image",
    "kind_for",
    "load_documents",
    "operand_image",
    "os_tag",
    "render_all",
    "resolve_image",
    "scaled_value",
    "validate_document",
    "validate_files",
    "validate_text",
    "write_all",
]

# -- one home for rules the controllers and the upgrade share (issue 11, item 4) ----------
__all__ += [
    "active_cluster_policy",
    "by_age",
    "names_and_more",
    "node_selector_terms_match",
    "pod_spec_targets",
    "template_pod_spec",
]
