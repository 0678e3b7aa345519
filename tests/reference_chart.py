"""The images NVIDIA's Helm chart (26.7) sets, read from its values file (a compatibility
fixture): by the environment variable NVIDIA's operator reads for each. The chart tests
check that ours renders the same; the fidelity tests give them to NVIDIA's operator."""

from __future__ import annotations

from typing import Any

import yaml

from components.api import (
    DEFAULT_IMAGES,
    ClusterPolicySpec,
    OperandImage,
    operand_image,
    resolve_image,
)
from tests.tools import REPO

COMPAT = REPO / "tests" / "fixtures" / "compat"
REFERENCE_VALUES = COMPAT / "reference-helm-values.yaml"
REFERENCE_CHART_VERSION = "v26.7.0"
"""The reference chart's appVersion: the version of the images its values leave unset (the
validator's and the node status exporter's: its own operator image)."""

IMAGE_SECTIONS: dict[str, tuple[str, ...]] = {
    "DRIVER_IMAGE": ("driver",),
    "DRIVER_MANAGER_IMAGE": ("driver", "manager"),
    "CONTAINER_TOOLKIT_IMAGE": ("toolkit",),
    "DEVICE_PLUGIN_IMAGE": ("devicePlugin",),
    "GFD_IMAGE": ("gfd",),
    "DCGM_IMAGE": ("dcgm",),
    "DCGM_EXPORTER_IMAGE": ("dcgmExporter",),
    "MIG_MANAGER_IMAGE": ("migManager",),
    "VALIDATOR_IMAGE": ("validator",),
    "GDS_IMAGE": ("gds",),
    "GDRCOPY_IMAGE": ("gdrcopy",),
    "VFIO_MANAGER_IMAGE": ("vfioManager",),
    "SANDBOX_DEVICE_PLUGIN_IMAGE": ("sandboxDevicePlugin",),
    "VGPU_DEVICE_MANAGER_IMAGE": ("vgpuDeviceManager",),
    "CC_MANAGER_IMAGE": ("ccManager",),
}
"""Each image variable of NVIDIA's operator, and the values section its chart fills it from
(the node status exporter's is the validator's variable, with the same image)."""


def reference_chart_images() -> dict[str, str]:
    """The image the reference's chart sets for each of `IMAGE_SECTIONS`."""
    values: dict[str, Any] = yaml.safe_load(REFERENCE_VALUES.read_text())
    out = {}
    for env, path in IMAGE_SECTIONS.items():
        section = values
        for key in path:
            section = section[key]
        version = section.get("version") or REFERENCE_CHART_VERSION
        out[env] = f"{section['repository']}/{section['image']}:{version}"
    return out


def policy_images(spec: ClusterPolicySpec) -> dict[str, str]:
    """The image ours resolves from `spec` (no image in its environment) for each of
    `IMAGE_SECTIONS`, the driver's before its OS suffix."""
    out = {}
    for operand, default in DEFAULT_IMAGES.items():
        if default.env not in IMAGE_SECTIONS or default.env in out:
            continue
        if operand is OperandImage.DRIVER:
            out[default.env] = resolve_image(spec.driver, operand, env={})
        elif operand in (OperandImage.GDS, OperandImage.GDRCOPY):
            section = spec.gds if operand is OperandImage.GDS else spec.gdrcopy
            out[default.env] = resolve_image(section, operand, env={})
        else:
            out[default.env] = operand_image(spec, operand, env={})
    return out
