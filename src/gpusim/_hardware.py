"""The simulated GPUs: product facts, and the MIG profile table as the hardware sees it.

Products are named as GPU feature discovery labels them (`nvidia.com/gpu.product`, spaces
turned into dashes). The MIG profiles and `all-balanced` layouts are the product's own
table (`components.api.mig_profiles`), read here, never copied. The media-engine and
graphics variants (`1g.10gb+me`) are not simulated: a simulated GPU refuses those layouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from components.api.mig_profiles import MIG_GPUS
from gpusim._errors import SimError

_MIB_PER_GB = 1024


@dataclass(frozen=True)
class MigProfile:
    """One MIG instance type, e.g. `1g.10gb`: compute slices and memory."""

    name: str
    per_gpu: int

    @property
    def slices(self) -> int:
        return int(self.name.split("g.", 1)[0])

    @property
    def memory_mib(self) -> int:
        return int(self.name.split(".", 1)[1].removesuffix("gb")) * _MIB_PER_GB


# Instances per GPU when the whole GPU is cut into one profile, and the `all-balanced`
# layout per GPU: the MIG manager's own table, so the simulated GPUs accept exactly the
# layouts the operator offers.
MIG_PROFILES: Mapping[str, tuple[MigProfile, ...]] = MappingProxyType(
    {gpu.name: tuple(MigProfile(name, count) for name, count in gpu.profiles) for gpu in MIG_GPUS}
)
MIG_BALANCED: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {gpu.name: MappingProxyType(dict(gpu.balanced)) for gpu in MIG_GPUS}
)


@dataclass(frozen=True)
class GpuProduct:
    """What GPU feature discovery reports for one GPU model."""

    name: str
    memory_mib: int
    family: str
    compute: tuple[int, int]
    mig_family: str | None = None

    @property
    def supports_mig(self) -> bool:
        return self.mig_family is not None

    @property
    def nvml_name(self) -> str:
        """The name NVML reports (GFD's label is it with spaces turned into dashes)."""
        return _NVML_NAMES.get(self.name, self.name.replace("-", " "))


PRODUCTS: Mapping[str, GpuProduct] = MappingProxyType(
    {
        p.name: p
        for p in (
            GpuProduct("NVIDIA-H100-80GB-HBM3", 81559, "hopper", (9, 0), "H100-80GB"),
            GpuProduct("NVIDIA-H200", 143771, "hopper", (9, 0), "H200-141GB"),
            GpuProduct("NVIDIA-A100-SXM4-80GB", 81920, "ampere", (8, 0), "A100-80GB"),
            GpuProduct("NVIDIA-A100-SXM4-40GB", 40960, "ampere", (8, 0), "A100-40GB"),
            GpuProduct("NVIDIA-A30", 24576, "ampere", (8, 0), "A30-24GB"),
            GpuProduct("NVIDIA-L40S", 46068, "ada-lovelace", (8, 9)),
            GpuProduct("NVIDIA-L4", 23034, "ada-lovelace", (8, 9)),
            GpuProduct("Tesla-T4", 15360, "turing", (7, 5)),
        )
    }
)
DEFAULT_PRODUCT = "NVIDIA-H100-80GB-HBM3"
_NVML_NAMES = {
    "NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
    "NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
}


def product(name: str) -> GpuProduct:
    """The product called `name`, or one sentence listing the known ones."""
    try:
        return PRODUCTS[name]
    except KeyError:
        raise SimError(
            f"unknown GPU product {name!r}; choose one of {', '.join(PRODUCTS)}"
        ) from None


class MigConfigError(ValueError):
    """A MIG config name this GPU cannot apply (the MIG manager reports `failed`)."""


def mig_layout(gpu: GpuProduct, config: str) -> dict[str, int]:
    """MIG instances per GPU for a MIG manager config name.

    `all-disabled` -> {} (MIG off); `all-enabled` -> {} (MIG on, no instances);
    `all-<profile>` -> that profile as often as it fits; `all-balanced` -> the mixed layout.
    """
    if config == "all-disabled":
        return {}
    if gpu.mig_family is None:
        raise MigConfigError(f"{gpu.name} does not support MIG")
    if config == "all-enabled":
        return {}
    if config == "all-balanced":
        return dict(MIG_BALANCED[gpu.mig_family])
    profile_name = config.removeprefix("all-")
    for profile in MIG_PROFILES[gpu.mig_family]:
        if config.startswith("all-") and profile.name == profile_name:
            return {profile.name: profile.per_gpu}
    raise MigConfigError(f"MIG config {config!r} is not valid for {gpu.name}")


def mig_profile(gpu: GpuProduct, name: str) -> MigProfile:
    assert gpu.mig_family is not None
    for profile in MIG_PROFILES[gpu.mig_family]:
        if profile.name == name:
            return profile
    raise MigConfigError(f"{name} is not a MIG profile of {gpu.name}")
