"""A rollback pins each driver DaemonSet back to its own nodes' last good image (per OS:
an image is per OS release), and without a rollback the render is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components.operands import Driver

from .cases import CLUSTER, container, daemonsets, policy, view

pytestmark = pytest.mark.unit
UBUNTU = "nvidia-driver-daemonset-ubuntu22.04"
RHEL = "nvidia-driver-daemonset-rhel9.4"
OLD_UBUNTU = "nvcr.io/nvidia/driver:580.95.05-ubuntu22.04"


def test_each_daemonset_runs_the_last_good_image_of_its_own_nodes() -> None:
    last_good = {"gpu-ubuntu-1": OLD_UBUNTU, "gpu-ubuntu-2": OLD_UBUNTU}
    pinned = daemonsets(
        Driver().render(policy(), replace(view(CLUSTER), last_good_images=last_good))
    )
    plain = daemonsets(Driver().render(policy(), view(CLUSTER)))
    assert container(pinned[UBUNTU])["image"] == OLD_UBUNTU
    assert container(plain[UBUNTU])["image"] == "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"
    # No RHEL node has a last good image of another version: its DaemonSet is unchanged.
    assert pinned[RHEL] == plain[RHEL]
