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

#: The image that sits inside another section in both: the driver manager's (`driver.manager`).
_NESTED_SECTIONS = {"DRIVER_MANAGER_IMAGE": ("driver", "manager")}


def _image_sections() -> dict[str, tuple[str, ...]]:
    """Each image variable of NVIDIA's operator whose image the reference's chart sets, and
    the values section it fills it from: from our image table (`DEFAULT_IMAGES`: variable
    and policy section), kept where the chart's section names a repository (not the vGPU
    manager's, which has no public image, nor ours alone). The first section of a variable
    wins: the node status exporter's is the validator's variable, with the same image."""
    values: dict[str, Any] = yaml.safe_load(REFERENCE_VALUES.read_text())
    fields = ClusterPolicySpec.model_fields
    out = dict(_NESTED_SECTIONS)
    for default in DEFAULT_IMAGES.values():
        if not default.section or default.env in out:
            continue
        key = fields[default.section].alias or default.section
        if values.get(key, {}).get("repository"):
            out[default.env] = (key,)
    return out


IMAGE_SECTIONS = _image_sections()


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
