"""The ClusterPolicy, NVIDIADriver and GPUCluster API: typed models and the pure rules on them.

Parse what the API server (or a YAML file) gives, read typed fields with the reference's
defaults, write back without losing anything::

    policy = ClusterPolicy.from_dict(obj)          # camelCase dict in
    policy.spec.driver.upgrade_policy.max_parallel_upgrades   # 1 unless set
    policy.to_dict()                               # exactly what was given, back out

Images::

    operand_image(policy.spec, OperandImage.DEVICE_PLUGIN)
    # nvcr.io/nvidia/k8s-device-plugin:v0.20.0
    driver_image(policy.spec.driver, os_id="ubuntu", os_version="22.04")
    # nvcr.io/nvidia/driver:595.91.07-ubuntu22.04

Status (the body of a status-subresource write)::

    status = ClusterPolicyStatus(state="notReady", namespace="gpu-operator")
    status.components = [ComponentStatus.build("state-driver", "notReady", ...)]
    status.mark_not_ready(Reason.DRIVER_NOT_READY, "driver not ready on 2 nodes")
    {"status": status.to_dict(defaults=True)}

YAML read with bounds (depth, aliases; libyaml where built), whatever the text:
`load_documents(text)`; the bounds themselves (the API server's and etcd's) in `limits`.

The CRDs generated from these models and the offline validator are not here: they serve the
command line only (`components.offline`), and an import contract keeps them out of `api`.
"""

from __future__ import annotations

from components.api._active import active_cluster_policy, by_age
from components.api._affinity import (
    daemon_pod_runs_on,
    node_selector_terms_match,
    pod_spec_targets,
    template_pod_spec,
)
from components.api._base import ApiModel, Cel, Format, IntOrString, ListMap, PreserveUnknown
from components.api._clusterpolicy import (
    ClusterPolicy,
    ClusterPolicySpec,
    MIGPodDeletionSpec,
    MIGStrategy,
)
from components.api._common import (
    ComponentSpec,
    ContainerProbeSpec,
    DriverManagerSpec,
    EnvVar,
    ImageSpec,
    OperandSpec,
    ResourceRequirements,
)
from components.api._driver import DriverSpec
from components.api._gpucluster import (
    GPU_CLUSTER_API_VERSION,
    GPU_CLUSTER_FINALIZER,
    GPU_CLUSTER_NAME,
    GPU_CLUSTER_SINGLETON,
    GPU_DRA_DRIVER,
    DRADriverSpec,
    DRAHealthcheckSpec,
    DRAKubeletPluginSpec,
    DRAStack,
    DRAStackSpec,
    GPUCluster,
    GPUClusterSpec,
    GPUClusterStatus,
    dra_stack,
)
from components.api._images import (
    DEFAULT_IMAGES,
    ImageDefault,
    ImageError,
    OperandImage,
    driver_image,
    driver_manager_image,
    driver_side_image,
    operand_image,
    operand_section,
    os_tag,
    resolve_image,
)
from components.api._labels import (
    CLIENT_DEPLOY_LABEL,
    COMPONENT_LABEL,
    DEPLOY_LABEL_PREFIX,
    DRIVER_CONFIG_DIGEST_ANNOTATION,
    DRIVER_CONFIG_DIGEST_ENV,
    DRIVER_DEPLOY_LABEL,
    DRIVER_KERNEL_PIN_LABEL,
    DRIVER_PRE_INSTALLED,
    DRIVER_UPGRADE_ENABLED_ANNOTATION,
    DRIVER_UPGRADE_STATE_LABEL,
    GPU_PRESENT_LABEL,
    KERNEL_LABEL,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MIG_CONFIG_LABEL,
    MIG_CONFIG_STATE_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    NFD_GPU_LABELS,
    NFD_PREFIX,
    NODE_AGENT_DEPLOY_LABEL,
    NVIDIA_DRIVER_OWNER_LABEL,
    OPERANDS_OPT_OUT_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    POD_SECURITY_LABELS,
    WORKLOAD_CONFIG_LABEL,
    mig_capable,
    opted_out,
)
from components.api._monitoring import ServiceMonitorConfig
from components.api._node_agent import (
    GPU_DRIVER_READY,
    GPU_HEALTHY,
    GPU_PROCESSES_ANNOTATION,
    GPU_VALIDATED,
    HOST_DRIVER_REASON,
    NODE_AGENT_CONDITIONS,
    GpuProcessEntry,
    gpu_processes,
    node_agent_enabled,
)
from components.api._nvidiadriver import NVIDIADriver, NVIDIADriverSpec
from components.api._remediation import (
    AGENT_REQUEST_ANNOTATIONS,
    DEFAULT_XIDS,
    REBOOT_REQUEST_ANNOTATION,
    REBOOT_RESULT_ANNOTATION,
    REBOOT_SENTINEL,
    REMEDIATION_APPROVED_ANNOTATION,
    REMEDIATION_FAILED_CONDITION,
    REMEDIATION_GPU_ANNOTATION,
    REMEDIATION_HISTORY_ANNOTATION,
    REMEDIATION_REASON_ANNOTATION,
    REMEDIATION_SINCE_ANNOTATION,
    REMEDIATION_STATE_LABEL,
    REMEDIATION_TAINT,
    REMEDIATION_XID_ANNOTATION,
    RESET_REQUEST_ANNOTATION,
    RESET_RESULT_ANNOTATION,
    RemediationSpec,
)
from components.api._rollback import (
    LAST_GOOD_IMAGE,
    ROLLBACK_ANNOTATION,
    ROLLBACK_CONDITION,
    ROLLBACK_ENDED,
    ROLLBACK_NODE,
    RollbackMode,
    RollbackRequest,
    pinned_image,
    rollback_condition,
    rollback_images,
    rollback_request,
)
from components.api._sandbox import DriverSideSpec, KataRuntimeClassSpec
from components.api._status import (
    MAX_LISTED_NODES,
    ClusterPolicyStatus,
    ComponentState,
    ComponentStatus,
    Condition,
    ConditionType,
    NodeAgentStatus,
    NodeConditionSummary,
    NodeUpgradeStatus,
    NVIDIADriverStatus,
    Reason,
    RemediationNodeStatus,
    UpgradeState,
    UpgradeStatus,
)
from components.api._takeover import (
    DRIVER_TAKEOVER_LABEL,
    FENCED_REVISIONS_ANNOTATION,
    KEEP_OFF_TAKEN_OVER,
    fence_patch,
    is_driver_template,
    is_fenced,
    is_foreign,
    revisions_before_fence,
)
from components.api._text import names_and_more
from components.api._unsupported import (
    UNSUPPORTED_CONDITION,
    UNSUPPORTED_REASON,
    not_acted_on,
    unsupported_fields,
    unsupported_message,
)
from components.api._upgrade import (
    WEEKDAYS,
    CanarySpec,
    DrainSpec,
    DriverUpgradePolicySpec,
    MaintenanceWindowSpec,
    NVIDIADriverUpgradePolicySpec,
    PodDeletionSpec,
    PreflightMode,
    PreflightSpec,
    RetryBackoffSpec,
    Weekday,
    scaled_value,
    time_zone_problem,
)
from components.api._yaml import LongInteger, YAMLProblem, load_documents

__all__ = [
    "AGENT_REQUEST_ANNOTATIONS",
    "DEFAULT_IMAGES",
    "DEFAULT_XIDS",
    "DRIVER_CONFIG_DIGEST_ANNOTATION",
    "DRIVER_CONFIG_DIGEST_ENV",
    "DRIVER_KERNEL_PIN_LABEL",
    "DRIVER_TAKEOVER_LABEL",
    "GPU_CLUSTER_API_VERSION",
    "GPU_CLUSTER_FINALIZER",
    "GPU_CLUSTER_NAME",
    "GPU_CLUSTER_SINGLETON",
    "GPU_DRA_DRIVER",
    "GPU_DRIVER_READY",
    "GPU_HEALTHY",
    "GPU_PROCESSES_ANNOTATION",
    "GPU_VALIDATED",
    "HOST_DRIVER_REASON",
    "KEEP_OFF_TAKEN_OVER",
    "KERNEL_LABEL",
    "MAX_LISTED_NODES",
    "NODE_AGENT_CONDITIONS",
    "NVIDIA_DRIVER_OWNER_LABEL",
    "OS_ID_LABEL",
    "OS_VERSION_LABEL",
    "POD_SECURITY_LABELS",
    "REBOOT_REQUEST_ANNOTATION",
    "REBOOT_RESULT_ANNOTATION",
    "REBOOT_SENTINEL",
    "REMEDIATION_APPROVED_ANNOTATION",
    "REMEDIATION_FAILED_CONDITION",
    "REMEDIATION_GPU_ANNOTATION",
    "REMEDIATION_HISTORY_ANNOTATION",
    "REMEDIATION_REASON_ANNOTATION",
    "REMEDIATION_SINCE_ANNOTATION",
    "REMEDIATION_STATE_LABEL",
    "REMEDIATION_TAINT",
    "REMEDIATION_XID_ANNOTATION",
    "RESET_REQUEST_ANNOTATION",
    "RESET_RESULT_ANNOTATION",
    "UNSUPPORTED_CONDITION",
    "UNSUPPORTED_REASON",
    "WEEKDAYS",
    "CanarySpec",
    "ClusterPolicy",
    "ClusterPolicySpec",
    "ClusterPolicyStatus",
    "ComponentSpec",
    "ComponentState",
    "ComponentStatus",
    "Condition",
    "ConditionType",
    "ContainerProbeSpec",
    "DRADriverSpec",
    "DRAHealthcheckSpec",
    "DRAKubeletPluginSpec",
    "DRAStack",
    "DRAStackSpec",
    "DrainSpec",
    "DriverManagerSpec",
    "DriverSideSpec",
    "DriverSpec",
    "DriverUpgradePolicySpec",
    "EnvVar",
    "GPUCluster",
    "GPUClusterSpec",
    "GPUClusterStatus",
    "GpuProcessEntry",
    "ImageDefault",
    "ImageError",
    "ImageSpec",
    "KataRuntimeClassSpec",
    "LongInteger",
    "MIGPodDeletionSpec",
    "MIGStrategy",
    "MaintenanceWindowSpec",
    "NVIDIADriver",
    "NVIDIADriverSpec",
    "NVIDIADriverStatus",
    "NVIDIADriverUpgradePolicySpec",
    "NodeAgentStatus",
    "NodeConditionSummary",
    "NodeUpgradeStatus",
    "OperandImage",
    "OperandSpec",
    "PodDeletionSpec",
    "PreflightMode",
    "PreflightSpec",
    "Reason",
    "RemediationNodeStatus",
    "RemediationSpec",
    "ResourceRequirements",
    "RetryBackoffSpec",
    "ServiceMonitorConfig",
    "UpgradeState",
    "UpgradeStatus",
    "Weekday",
    "YAMLProblem",
    "dra_stack",
    "driver_image",
    "driver_manager_image",
    "driver_side_image",
    "gpu_processes",
    "load_documents",
    "node_agent_enabled",
    "operand_image",
    "operand_section",
    "os_tag",
    "resolve_image",
    "scaled_value",
    "time_zone_problem",
    "unsupported_fields",
    "unsupported_message",
]

# -- one home for rules the controllers and the upgrade share (issue 11, item 4) ----------
__all__ += [
    "CLIENT_DEPLOY_LABEL",
    "COMPONENT_LABEL",
    "DEPLOY_LABEL_PREFIX",
    "DRIVER_DEPLOY_LABEL",
    "DRIVER_PRE_INSTALLED",
    "DRIVER_UPGRADE_ENABLED_ANNOTATION",
    "DRIVER_UPGRADE_STATE_LABEL",
    "GPU_PRESENT_LABEL",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "MIG_CONFIG_LABEL",
    "MIG_CONFIG_STATE_LABEL",
    "MIG_MANAGER_DEPLOY_LABEL",
    "NFD_GPU_LABELS",
    "NFD_PREFIX",
    "NODE_AGENT_DEPLOY_LABEL",
    "OPERANDS_OPT_OUT_LABEL",
    "WORKLOAD_CONFIG_LABEL",
    "active_cluster_policy",
    "by_age",
    "daemon_pod_runs_on",
    "mig_capable",
    "names_and_more",
    "node_selector_terms_match",
    "opted_out",
    "pod_spec_targets",
    "template_pod_spec",
]

# -- taking over from NVIDIA's operator (issue 12, item 4) ---------------------------------
__all__ += [
    "FENCED_REVISIONS_ANNOTATION",
    "fence_patch",
    "is_driver_template",
    "is_fenced",
    "is_foreign",
    "revisions_before_fence",
]

# -- the schema markers the CRD generator (components.offline) reads off the models -------
__all__ += [
    "ApiModel",
    "Cel",
    "Format",
    "IntOrString",
    "ListMap",
    "PreserveUnknown",
    "not_acted_on",
]

# -- a way back from a bad driver rollout (issue 52, item 3) ------------------------------
__all__ += [
    "LAST_GOOD_IMAGE",
    "ROLLBACK_ANNOTATION",
    "ROLLBACK_CONDITION",
    "ROLLBACK_ENDED",
    "ROLLBACK_NODE",
    "RollbackMode",
    "RollbackRequest",
    "pinned_image",
    "rollback_condition",
    "rollback_images",
    "rollback_request",
]
