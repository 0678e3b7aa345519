"""The driver section shared by both kinds: `ClusterPolicy.spec.driver` and (in part)
`NVIDIADriver.spec`. Field names, enums and defaults follow the reference's
`clusterpolicy_types.go`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, crd_default
from components.api._common import (
    ContainerProbeSpec,
    DriverManagerSpec,
    GPUDirectRDMASpec,
    NameRef,
    OperandSpec,
)
from components.api._upgrade import DriverUpgradePolicySpec

KernelModuleType = Literal["auto", "open", "proprietary"]


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


class DriverSpec(OperandSpec):
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
