"""Image references: `repository/image:version`, `repository/image@sha256:...`.

Resolution, in order:

1. What the section sets. Parts it leaves empty come from the operand's default
   (`DEFAULT_IMAGES`), so `devicePlugin: {version: v0.19.0}` keeps the default repository.
   An `image` with a `/` and no `repository` is a full path; an `image` that already has a
   tag or digest and no `version` is used as is (tools like kbld write that).
2. When the section sets none of `repository`, `image`, `version`: the operator's
   environment variable the reference reads (`DRIVER_IMAGE`, `DEVICE_PLUGIN_IMAGE`, ...),
   as OLM bundles set them.
3. The default.

Driver images get an OS suffix on the tag (`595.91.07-ubuntu22.04`), precompiled ones the
kernel too (`595-6.8.0-60-generic-ubuntu24.04`); a digest gets no suffix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from components import __version__
from components.api._clusterpolicy import ClusterPolicySpec
from components.api._common import ImageSpec, OperandSpec
from components.api._driver import DriverSpec
from components.api._nvidiadriver import NVIDIADriverSpec


class ImageError(ValueError):
    """An image reference cannot be made from the spec (said in one sentence)."""


class OperandImage(StrEnum):
    """Which image to resolve: one per operand that runs one (and the driver manager's and
    the init container's), named as in the reference's state names.

    Not an operand itself: the operands the controller deploys are `components.operands`.
    """

    DRIVER = "driver"
    DRIVER_MANAGER = "driver-manager"
    CONTAINER_TOOLKIT = "container-toolkit"
    DEVICE_PLUGIN = "device-plugin"
    GPU_FEATURE_DISCOVERY = "gpu-feature-discovery"
    DCGM = "dcgm"
    DCGM_EXPORTER = "dcgm-exporter"
    MIG_MANAGER = "mig-manager"
    OPERATOR_VALIDATOR = "operator-validator"
    NODE_STATUS_EXPORTER = "node-status-exporter"
    NODE_AGENT = "node-agent"
    INIT_CONTAINER = "init-container"
    VFIO_MANAGER = "vfio-manager"
    SANDBOX_DEVICE_PLUGIN = "sandbox-device-plugin"
    VGPU_MANAGER = "vgpu-manager"
    VGPU_DEVICE_MANAGER = "vgpu-device-manager"
    KATA_MANAGER = "kata-manager"
    CC_MANAGER = "cc-manager"
    GDS = "gds"
    GDRCOPY = "gdrcopy"


@dataclass(frozen=True)
class ImageDefault:
    """An operand's default image, the environment variable that can replace it, and the
    ClusterPolicy section (its attribute) that names the image."""

    repository: str
    image: str
    version: str
    env: str
    section: str = ""

    @property
    def reference(self) -> str:
        return join_image(self.repository, self.image, self.version)


#: NVIDIA's operator release the defaults below are taken from (its Helm chart's values).
#: Since 26.x its own image carries the validator and the node status exporter: the chart
#: sets `validator.image: gpu-operator` with the chart's appVersion as the version.
OPERATOR_VERSION = "v26.7.0"

_NV = "nvcr.io/nvidia"
_CN = "nvcr.io/nvidia/cloud-native"
_K8S = "nvcr.io/nvidia/k8s"
_I = ImageDefault

#: Each image: its default, the operator's environment variable that replaces it, and the
#: ClusterPolicy section that names it (none for the driver manager and the init container,
#: which sit inside other sections).
DEFAULT_IMAGES: Mapping[OperandImage, ImageDefault] = {
    OperandImage.DRIVER: _I(_NV, "driver", "595.91.07", "DRIVER_IMAGE", "driver"),
    OperandImage.DRIVER_MANAGER: _I(_CN, "k8s-driver-manager", "v0.12.0", "DRIVER_MANAGER_IMAGE"),
    OperandImage.CONTAINER_TOOLKIT: _I(
        _K8S, "container-toolkit", "v1.20.0", "CONTAINER_TOOLKIT_IMAGE", "toolkit"
    ),
    OperandImage.DEVICE_PLUGIN: _I(
        _NV, "k8s-device-plugin", "v0.20.0", "DEVICE_PLUGIN_IMAGE", "device_plugin"
    ),
    OperandImage.GPU_FEATURE_DISCOVERY: _I(_NV, "k8s-device-plugin", "v0.20.0", "GFD_IMAGE", "gfd"),
    OperandImage.DCGM: _I(_CN, "dcgm", "4.6.0-1-ubuntu24.04", "DCGM_IMAGE", "dcgm"),
    OperandImage.DCGM_EXPORTER: _I(
        _K8S, "dcgm-exporter", "4.6.0-4.8.3-distroless", "DCGM_EXPORTER_IMAGE", "dcgm_exporter"
    ),
    OperandImage.MIG_MANAGER: _I(
        _CN, "k8s-mig-manager", "v0.15.0", "MIG_MANAGER_IMAGE", "mig_manager"
    ),
    OperandImage.OPERATOR_VALIDATOR: _I(
        _NV, "gpu-operator", OPERATOR_VERSION, "VALIDATOR_IMAGE", "validator"
    ),
    OperandImage.NODE_STATUS_EXPORTER: _I(
        _NV, "gpu-operator", OPERATOR_VERSION, "VALIDATOR_IMAGE", "node_status_exporter"
    ),
    # Ours: the operator's own image (`gpu-operator node-agent`); the Deployment names it.
    OperandImage.NODE_AGENT: _I("", "gpu-operator", __version__, "NODE_AGENT_IMAGE", "node_agent"),
    OperandImage.INIT_CONTAINER: _I(_NV, "gpu-operator", OPERATOR_VERSION, "CUDA_BASE_IMAGE"),
    # The VFIO manager runs `vfio-manage` from the driver manager's image.
    OperandImage.VFIO_MANAGER: _I(
        _CN, "k8s-driver-manager", "v0.12.0", "VFIO_MANAGER_IMAGE", "vfio_manager"
    ),
    OperandImage.SANDBOX_DEVICE_PLUGIN: _I(
        _NV,
        "kubevirt-gpu-device-plugin",
        "v1.6.0",
        "SANDBOX_DEVICE_PLUGIN_IMAGE",
        "sandbox_device_plugin",
    ),
    # vGPU manager images are built by the user from NVIDIA's licensed vGPU host driver:
    # there is no public default (the policy must name repository and version).
    OperandImage.VGPU_MANAGER: _I("", "vgpu-manager", "", "VGPU_MANAGER_IMAGE", "vgpu_manager"),
    OperandImage.VGPU_DEVICE_MANAGER: _I(
        _CN, "vgpu-device-manager", "v0.5.0", "VGPU_DEVICE_MANAGER_IMAGE", "vgpu_device_manager"
    ),
    OperandImage.KATA_MANAGER: _I(
        _CN, "k8s-kata-manager", "v0.2.3", "KATA_MANAGER_IMAGE", "kata_manager"
    ),
    OperandImage.CC_MANAGER: _I(_CN, "k8s-cc-manager", "v0.4.3", "CC_MANAGER_IMAGE", "cc_manager"),
    OperandImage.GDS: _I(_CN, "nvidia-fs", "2.29.4", "GDS_IMAGE", "gds"),
    OperandImage.GDRCOPY: _I(_CN, "gdrdrv", "v2.6", "GDRCOPY_IMAGE", "gdrcopy"),
}


def join_image(repository: str, image: str, version: str) -> str:
    """`repository/image:version`, or `@version` when it is a `sha256:` digest."""
    path = f"{repository.rstrip('/')}/{image}" if repository else image
    if not version:
        return path
    return f"{path}@{version}" if version.startswith("sha256:") else f"{path}:{version}"


def _has_tag_or_digest(image: str) -> bool:
    return "@" in image or ":" in image.rsplit("/", 1)[-1]


def resolve_image(
    spec: ImageSpec,
    default: OperandImage | ImageDefault,
    *,
    env: Mapping[str, str] | None = None,
) -> str:
    """The image reference for an operand section (see the module docstring)."""
    fallback = DEFAULT_IMAGES[default] if isinstance(default, OperandImage) else default
    environ = os.environ if env is None else env
    if not (spec.repository or spec.image or spec.version):
        return environ.get(fallback.env) or fallback.reference
    if spec.image and not spec.repository and not spec.version and _has_tag_or_digest(spec.image):
        return spec.image
    image = spec.image or fallback.image
    if spec.repository:
        repository = spec.repository
    elif "/" in image:
        repository = ""
    else:
        repository = fallback.repository
    return join_image(repository, image, spec.version or fallback.version)


# --- the driver's OS- and kernel-specific tags -----------------------------------------

#: Distributions whose driver images are tagged with the major version only (`rhel9`).
MAJOR_VERSION_ONLY = frozenset({"rhel", "rocky", "ol"})


def os_tag(os_id: str, version_id: str) -> str:
    """The OS part of a driver tag, from a node's `os_release` ID and VERSION_ID labels:
    `ubuntu22.04`; `rhel9` for RHEL, Rocky and Oracle Linux (major version only)."""
    os_id = os_id.strip().lower()
    version_id = version_id.strip()
    if not os_id or not version_id:
        raise ImageError(
            "the node's OS is unknown (labels feature.node.kubernetes.io/system-os_release.ID "
            "and .VERSION_ID are needed to pick a driver image)"
        )
    if os_id in MAJOR_VERSION_ONLY:
        version_id = version_id.split(".", 1)[0]
    return f"{os_id}{version_id}"


def driver_image(
    spec: DriverSpec | NVIDIADriverSpec,
    *,
    os_id: str,
    os_version: str,
    kernel: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The driver image for a node with that OS (and kernel, when precompiled).

    `<ref>:<version>-<ostag>`; precompiled: `<ref>:<version>-<kernel>-<ostag>`; a digest
    is used as is (and cannot be combined with precompiled images).
    """
    base = resolve_image(spec, OperandImage.DRIVER, env=env)
    digest = "@" in base
    if spec.use_precompiled:
        if digest:
            raise ImageError(
                "a sha256 digest cannot be the driver version with usePrecompiled: "
                "precompiled images are picked per kernel"
            )
        if not kernel:
            raise ImageError(
                "precompiled drivers need the node's kernel "
                "(label feature.node.kubernetes.io/kernel-version.full)"
            )
        return f"{base}-{kernel}-{os_tag(os_id, os_version)}"
    if digest:
        return base
    return f"{base}-{os_tag(os_id, os_version)}"


def driver_side_image(
    spec: ImageSpec,
    operand: OperandImage,
    *,
    os_id: str,
    os_version: str,
    env: Mapping[str, str] | None = None,
) -> str:
    """The image of a driver-side container (GPUDirect Storage's `nvidia-fs`, GDRCopy's
    `gdrdrv`): built per OS like the driver, so tagged `<version>-<ostag>` for the node's
    OS; a digest is used as is. There are no precompiled variants of these images."""
    base = resolve_image(spec, operand, env=env)
    if "@" in base:
        return base
    return f"{base}-{os_tag(os_id, os_version)}"


def driver_manager_image(
    spec: DriverSpec | NVIDIADriverSpec, *, env: Mapping[str, str] | None = None
) -> str:
    """The k8s-driver-manager init container's image."""
    return resolve_image(spec.manager, OperandImage.DRIVER_MANAGER, env=env)


def operand_image(
    spec: ClusterPolicySpec, operand: OperandImage, *, env: Mapping[str, str] | None = None
) -> str:
    """The image of a ClusterPolicy operand that does not depend on the node.

    For the driver itself (its tag depends on the node's OS) use `driver_image`.
    """
    if operand is OperandImage.DRIVER:
        raise ImageError("the driver's image depends on the node: use driver_image()")
    if operand is OperandImage.DRIVER_MANAGER:
        return driver_manager_image(spec.driver, env=env)
    if operand is OperandImage.INIT_CONTAINER:
        return resolve_image(spec.operator.init_container, operand, env=env)
    return resolve_image(operand_section(spec, operand), operand, env=env)


def operand_section(spec: ClusterPolicySpec, operand: OperandImage) -> OperandSpec:
    """The ClusterPolicy section that names the operand's image (and configures it)."""
    section: OperandSpec = getattr(spec, DEFAULT_IMAGES[operand].section)
    return section
