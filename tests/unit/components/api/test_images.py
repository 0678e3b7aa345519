"""Image references: spec first, then the operator's environment, then the reference's defaults."""

from __future__ import annotations

import pytest

from components.api import (
    DEFAULT_IMAGES,
    ClusterPolicySpec,
    DriverSpec,
    ImageError,
    ImageSpec,
    NVIDIADriverSpec,
    OperandImage,
    driver_image,
    driver_manager_image,
    operand_image,
    os_tag,
    resolve_image,
)
from tests.reference_chart import policy_images, reference_chart_images

pytestmark = pytest.mark.unit
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("operand", "image"),
    [
        (OperandImage.DRIVER_MANAGER, "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"),
        (OperandImage.CONTAINER_TOOLKIT, "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0"),
        (OperandImage.DEVICE_PLUGIN, "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"),
        (OperandImage.GPU_FEATURE_DISCOVERY, "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"),
        (OperandImage.DCGM, "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"),
        (OperandImage.DCGM_EXPORTER, "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"),
        (OperandImage.MIG_MANAGER, "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"),
    ],
)
def test_defaults_from_design(operand: OperandImage, image: str) -> None:
    assert operand_image(ClusterPolicySpec(), operand, env={}) == image


def test_default_driver_image() -> None:
    assert DEFAULT_IMAGES[OperandImage.DRIVER].reference == "nvcr.io/nvidia/driver:595.91.07"
    image = driver_image(DriverSpec(), os_id="ubuntu", os_version="22.04", env={})
    assert image == "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"


def test_spec_sets_every_part() -> None:
    spec = ImageSpec(repository="registry.local/mirror", image="k8s-device-plugin", version="v1")
    assert resolve_image(spec, OperandImage.DEVICE_PLUGIN, env={}) == (
        "registry.local/mirror/k8s-device-plugin:v1"
    )


def test_parts_left_empty_come_from_the_default() -> None:
    spec = ClusterPolicySpec.from_dict({"devicePlugin": {"version": "v0.19.1"}})
    assert operand_image(spec, OperandImage.DEVICE_PLUGIN, env={}) == (
        "nvcr.io/nvidia/k8s-device-plugin:v0.19.1"
    )
    spec = ClusterPolicySpec.from_dict({"toolkit": {"repository": "mirror.example.com/nv"}})
    assert operand_image(spec, OperandImage.CONTAINER_TOOLKIT, env={}) == (
        "mirror.example.com/nv/container-toolkit:v1.20.0"
    )


def test_a_digest_uses_at() -> None:
    spec = ImageSpec(repository="nvcr.io/nvidia/k8s", image="container-toolkit", version=DIGEST)
    assert resolve_image(spec, OperandImage.CONTAINER_TOOLKIT, env={}) == (
        f"nvcr.io/nvidia/k8s/container-toolkit@{DIGEST}"
    )


def test_full_path_in_image() -> None:
    spec = ImageSpec(image="nvcr.io/nvidia/driver", version="580.1")
    assert resolve_image(spec, OperandImage.DRIVER, env={}) == "nvcr.io/nvidia/driver:580.1"
    tagged = ImageSpec(image=f"my.registry/dp@{DIGEST}")
    assert resolve_image(tagged, OperandImage.DEVICE_PLUGIN, env={}) == f"my.registry/dp@{DIGEST}"


def test_environment_replaces_the_default_only_when_the_spec_sets_nothing() -> None:
    env = {"DEVICE_PLUGIN_IMAGE": "olm.example.com/device-plugin:pinned"}
    assert operand_image(ClusterPolicySpec(), OperandImage.DEVICE_PLUGIN, env=env) == (
        "olm.example.com/device-plugin:pinned"
    )
    spec = ClusterPolicySpec.from_dict({"devicePlugin": {"version": "v9"}})
    assert operand_image(spec, OperandImage.DEVICE_PLUGIN, env=env) == (
        "nvcr.io/nvidia/k8s-device-plugin:v9"
    )


def test_driver_manager_and_init_container() -> None:
    spec = ClusterPolicySpec.from_dict({"driver": {"manager": {"version": "v0.11.0"}}})
    assert driver_manager_image(spec.driver, env={}) == (
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.11.0"
    )
    assert operand_image(spec, OperandImage.DRIVER_MANAGER, env={}).endswith(":v0.11.0")
    assert operand_image(spec, OperandImage.INIT_CONTAINER, env={})
    with pytest.raises(ImageError, match="depends on the node"):
        operand_image(spec, OperandImage.DRIVER)


@pytest.mark.parametrize(
    ("os_id", "version", "tag"),
    [
        ("ubuntu", "22.04", "ubuntu22.04"),
        ("ubuntu", "24.04", "ubuntu24.04"),
        ("rhel", "9.4", "rhel9"),
        ("rhel", "8.10", "rhel8"),
        ("rocky", "9.3", "rocky9"),
        ("ol", "8.9", "ol8"),
        ("sles", "15.5", "sles15.5"),
        ("Ubuntu", " 20.04 ", "ubuntu20.04"),
    ],
)
def test_os_tag(os_id: str, version: str, tag: str) -> None:
    assert os_tag(os_id, version) == tag


def test_os_tag_needs_both_labels() -> None:
    with pytest.raises(ImageError, match="OS is unknown"):
        os_tag("", "22.04")


def test_driver_tag_gets_the_os_suffix() -> None:
    spec = DriverSpec(repository="nvcr.io/nvidia", image="driver", version="580.95.05")
    assert driver_image(spec, os_id="rhel", os_version="9.6", env={}) == (
        "nvcr.io/nvidia/driver:580.95.05-rhel9"
    )


def test_driver_digest_gets_no_suffix() -> None:
    spec = DriverSpec(version=DIGEST)
    assert driver_image(spec, os_id="ubuntu", os_version="22.04", env={}) == (
        f"nvcr.io/nvidia/driver@{DIGEST}"
    )


def test_precompiled_tag_has_kernel_and_os() -> None:
    spec = DriverSpec(use_precompiled=True, version="595")
    image = driver_image(
        spec, os_id="ubuntu", os_version="24.04", kernel="6.8.0-60-generic", env={}
    )
    assert image == "nvcr.io/nvidia/driver:595-6.8.0-60-generic-ubuntu24.04"
    rhel = driver_image(
        spec, os_id="rhel", os_version="9.4", kernel="5.14.0-427.el9.x86_64", env={}
    )
    assert rhel == "nvcr.io/nvidia/driver:595-5.14.0-427.el9.x86_64-rhel9"


def test_precompiled_needs_a_kernel_and_no_digest() -> None:
    with pytest.raises(ImageError, match="kernel"):
        driver_image(DriverSpec(use_precompiled=True), os_id="ubuntu", os_version="22.04")
    with pytest.raises(ImageError, match="digest"):
        driver_image(
            DriverSpec(use_precompiled=True, version=DIGEST),
            os_id="ubuntu",
            os_version="22.04",
            kernel="6.8.0",
        )


def test_nvidiadriver_image() -> None:
    sample = NVIDIADriverSpec.from_dict(
        {"repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07"}
    )
    assert driver_image(sample, os_id="ubuntu", os_version="22.04", env={}) == (
        "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"
    )
    # The CRD's default image is a full path (no repository).
    defaulted = NVIDIADriverSpec.from_dict({"image": "nvcr.io/nvidia/driver", "version": "580"})
    assert driver_image(defaulted, os_id="ubuntu", os_version="24.04", env={}) == (
        "nvcr.io/nvidia/driver:580-ubuntu24.04"
    )
    assert driver_image(NVIDIADriverSpec(), os_id="ubuntu", os_version="24.04", env={}) == (
        "nvcr.io/nvidia/driver:595.91.07-ubuntu24.04"
    )


def test_our_defaults_are_the_images_the_reference_chart_sets() -> None:
    """NVIDIA's 26.7 chart: every operand image from its values, the validator's (and the
    node status exporter's) from its own operator image at its appVersion."""
    ours = policy_images(ClusterPolicySpec())
    assert ours == reference_chart_images()
    assert ours["VALIDATOR_IMAGE"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert (
        operand_image(ClusterPolicySpec(), OperandImage.NODE_STATUS_EXPORTER, env={})
        == (ours["VALIDATOR_IMAGE"])
    )
