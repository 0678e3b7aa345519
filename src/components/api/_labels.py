"""Node labels that more than one part of the operator reads or writes."""

from __future__ import annotations

from typing import Final

# -- written by Node Feature Discovery -----------------------------------------------------

KERNEL_LABEL: Final = "feature.node.kubernetes.io/kernel-version.full"
"""The kernel a node runs."""
OS_ID_LABEL: Final = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_LABEL: Final = "feature.node.kubernetes.io/system-os_release.VERSION_ID"

# -- written by the operator and its operands ----------------------------------------------

MIG_CAPABLE_LABEL: Final = "nvidia.com/mig.capable"
"""`true` on a node whose GPUs support MIG (GPU feature discovery)."""

NVIDIA_DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.nvidiadriver"
"""On DaemonSets rendered for an NVIDIADriver: the NVIDIADriver's name."""

DRIVER_KERNEL_PIN_LABEL: Final = "nvidia.com/precompiled-driver.kernel-version.full"
"""With precompiled drivers: the kernel whose driver DaemonSet the node belongs to.

Precompiled driver DaemonSets select nodes on this label instead of the kernel label
itself. A kernel change would otherwise move the node from one DaemonSet to another at
once, and the DaemonSet controller would swap the driver under running GPU pods. The
upgrade controller writes it: right away where no driver runs yet (or auto upgrade is
off), and, once the node is cordoned and cleared, as the step that restarts its driver.
"""
