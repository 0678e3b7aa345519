"""`NVIDIADriver` (`nvidia.com/v1alpha1`, cluster-scoped): a driver per node pool.

Used when `ClusterPolicy.spec.driver.useNvidiaDriverCRD` is true. Each NVIDIADriver
selects its nodes with `nodeSelector`; the one with `default: true` (no nodeSelector) takes
the GPU nodes no other one selects. Fields follow the reference's
`api/nvidia/v1alpha1/nvidiadriver_types.go`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, crd_default
from components.api._common import (
    ComponentSpec,
    ContainerProbeSpec,
    DriverManagerSpec,
    GPUDirectRDMASpec,
    NameRef,
    ObjectMeta,
    StringMap,
    Toleration,
)
from components.api._core import NodeAffinity, PodSecurityContext
from components.api._driver import PRECOMPILED_NO_DIGEST, KernelModuleType
from components.api._status import NVIDIADriverStatus
from components.api._upgrade import NVIDIADriverUpgradePolicySpec

NVIDIA_DRIVER_API_VERSION = "nvidia.com/v1alpha1"
DriverType = Literal["gpu", "vgpu", "vgpu-host-manager"]


def _immutable(field: str) -> Cel:
    return Cel(
        rule="self == oldSelf",
        message=(
            f"{field} is an immutable field. Please create a new NvidiaDriver resource instead "
            "when you want to change this setting."
        ),
        check=lambda _value: True,
        transition=True,
    )


def _default_has_no_selector(data: dict[str, Any]) -> bool:
    selector = data.get("nodeSelector")
    return not (data.get("default") is True and isinstance(selector, dict) and selector)


class GPUDirectStorageSpec(ComponentSpec):
    """The GPUDirect Storage (nvidia-fs) driver container."""

    enabled: bool = False


class GDRCopySpec(ComponentSpec):
    """The GDRCopy (gdrdrv) driver container."""

    enabled: bool = False
    use_precompiled: bool = False


class DriverLicensingConfigSpec(ApiModel):
    """vGPU guest driver licensing."""

    secret_name: str = Field(default="", description="Secret with the licensing token.")
    name: str = Field(default="", description="Deprecated: a ConfigMap; use secretName.")
    nls_enabled: bool = Field(default=True, description="Use NVIDIA License System.")


class NVIDIADriverSpec(ComponentSpec):
    """The driver for one pool of GPU nodes."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (
        Cel(
            rule=(
                "!(has(self.default) && self.default) || !has(self.nodeSelector) || "
                "size(self.nodeSelector) == 0"
            ),
            message="default NVIDIADriver must not use nodeSelector",
            check=_default_has_no_selector,
            field_path=".nodeSelector",
            reason="FieldValueForbidden",
        ),
        PRECOMPILED_NO_DIGEST,
    )

    default: bool = crd_default(
        False,
        required=True,
        description="The fallback for GPU nodes no other NVIDIADriver selects (no nodeSelector).",
    )
    driver_type: Annotated[DriverType, _immutable("driverType")] = crd_default(
        "gpu", required=True, description="gpu, vgpu (guest), or vgpu-host-manager."
    )
    use_precompiled: Annotated[bool, _immutable("usePrecompiled")] = Field(
        default=False, description="Use precompiled driver images (one DaemonSet per kernel)."
    )
    use_open_kernel_modules: bool = Field(
        default=False, description="Deprecated: use kernelModuleType."
    )
    kernel_module_type: KernelModuleType = crd_default("auto")
    image: str = crd_default(
        "nvcr.io/nvidia/driver", required=True, description="Driver image name or path."
    )
    version: str = Field(
        default="", description="Driver version (a branch, like 595, when precompiled)."
    )
    startup_probe: ContainerProbeSpec | None = None
    liveness_probe: ContainerProbeSpec | None = None
    readiness_probe: ContainerProbeSpec | None = None
    rdma: GPUDirectRDMASpec = Field(default_factory=GPUDirectRDMASpec)
    gds: GPUDirectStorageSpec = Field(default_factory=GPUDirectStorageSpec)
    gdrcopy: GDRCopySpec = Field(default_factory=GDRCopySpec)
    manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)
    repo_config: NameRef = Field(default_factory=NameRef)
    cert_config: NameRef = Field(default_factory=NameRef)
    licensing_config: DriverLicensingConfigSpec = Field(default_factory=DriverLicensingConfigSpec)
    virtual_topology_config: NameRef = Field(default_factory=NameRef)
    kernel_module_config: NameRef = Field(default_factory=NameRef)
    secret_env: str = ""
    upgrade_policy: NVIDIADriverUpgradePolicySpec = Field(
        default_factory=NVIDIADriverUpgradePolicySpec
    )
    node_selector: StringMap = Field(
        default_factory=dict,
        description="Nodes this driver is for; empty means every GPU node (when default).",
    )
    node_affinity: NodeAffinity | None = Field(
        default=None, description="Node affinity of the driver pods."
    )
    labels: StringMap = Field(default_factory=dict)
    annotations: StringMap = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    priority_class_name: str = ""
    pod_security_context: PodSecurityContext | None = Field(
        default=None, description="Security context of the driver pods."
    )
    host_network: bool = False


class NVIDIADriver(ApiModel):
    """An NVIDIADriver: the driver for one pool of GPU nodes."""

    api_version: Literal["nvidia.com/v1alpha1"] = "nvidia.com/v1alpha1"
    kind: Literal["NVIDIADriver"] = "NVIDIADriver"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NVIDIADriverSpec = Field(default_factory=NVIDIADriverSpec)
    status: NVIDIADriverStatus | None = None
