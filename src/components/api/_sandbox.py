"""ClusterPolicy sections for sandboxed (VM) workloads, vGPU, confidential computing and
GPUDirect Storage / GDRCopy.

Typed so the API server checks them as the reference's does. The sandbox ones are acted
on by the VM operands (`components.operands`, the last seven states), except
`kataSandboxDevicePlugin` (Kata's own device plugin is not deployed yet); the driver operand
acts on `gds` and `gdrcopy` (sidecars of the driver pod). `components.api.unsupported_fields`
names what is switched on and not acted on (in the policy's status and `gpu-operator
validate`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.api._base import ApiModel, crd_default
from components.api._common import (
    DriverManagerSpec,
    EnvVar,
    ImageSpec,
    NameRef,
    OperandSpec,
    StringMap,
)

SandboxWorkload = Literal["container", "vm-passthrough", "vm-vgpu"]
SandboxMode = Literal["kubevirt", "kata"]
CCMode = Literal["on", "off", "devtools"]


class PSPSpec(ApiModel):
    """PodSecurityPolicies (removed from Kubernetes in 1.25)."""

    enabled: bool = False


class SandboxWorkloadsSpec(ApiModel):
    """GPUs handed to virtual machines (KubeVirt or Kata) instead of containers."""

    enabled: bool = Field(default=False, description="Support sandboxed workloads.")
    default_workload: SandboxWorkload = crd_default(
        "container", description="Workload of nodes without nvidia.com/gpu.workload.config."
    )
    mode: SandboxMode = crd_default("kubevirt", description="kubevirt or kata.")


class VGPUManagerSpec(OperandSpec):
    """The vGPU host manager DaemonSet."""

    enabled: bool = False
    driver_manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)
    kernel_module_config: NameRef = Field(default_factory=NameRef)


class VGPUDevicesConfigSpec(ApiModel):
    """The vGPU device configuration ConfigMap."""

    name: str = ""
    default: str = crd_default("default", description="Config for nodes that name none.")


class VGPUDeviceManagerSpec(OperandSpec):
    """The vGPU device manager DaemonSet."""

    enabled: bool = True
    config: VGPUDevicesConfigSpec = Field(default_factory=VGPUDevicesConfigSpec)


class VFIOManagerSpec(OperandSpec):
    """The VFIO manager DaemonSet (binds GPUs to vfio-pci for passthrough)."""

    enabled: bool = True
    driver_manager: DriverManagerSpec = Field(default_factory=DriverManagerSpec)


class SandboxDevicePluginSpec(OperandSpec):
    """A device plugin advertising GPUs to virtual machines."""

    enabled: bool = True


class KataArtifactsSpec(ApiModel):
    """Where a Kata runtime class's artifacts come from (an OCI image)."""

    url: str
    pull_secret: str = ""


class KataRuntimeClassSpec(ApiModel):
    """One Kata RuntimeClass to create."""

    name: str
    node_selector: StringMap = Field(default_factory=dict)
    artifacts: KataArtifactsSpec


class KataManagerConfigSpec(ApiModel):
    """The Kata manager's runtime classes."""

    artifacts_dir: str = crd_default(
        "/opt/nvidia-gpu-operator/artifacts/runtimeclasses",
        description="Where artifacts are kept on the host.",
    )
    runtime_classes: list[KataRuntimeClassSpec] = Field(default_factory=list)


class KataManagerSpec(OperandSpec):
    """The Kata manager DaemonSet."""

    enabled: bool = False
    config: KataManagerConfigSpec = Field(default_factory=KataManagerConfigSpec)


class CCManagerSpec(OperandSpec):
    """The confidential computing manager DaemonSet."""

    enabled: bool = False
    default_mode: CCMode | None = Field(default=None, description="on, off or devtools.")


class DriverSideSpec(ImageSpec):
    """A driver-side container of the driver pod (GPUDirect Storage, GDRCopy)."""

    enabled: bool = False
    args: list[str] = Field(default_factory=list, description="Extra container arguments.")
    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")
