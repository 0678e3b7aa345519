"""Node labels that more than one part of the operator reads or writes."""

from __future__ import annotations

from typing import Final

KERNEL_LABEL: Final = "feature.node.kubernetes.io/kernel-version.full"
"""The kernel a node runs, from Node Feature Discovery."""

DRIVER_KERNEL_PIN_LABEL: Final = "nvidia.com/precompiled-driver.kernel-version.full"
"""With precompiled drivers: the kernel whose driver DaemonSet the node belongs to.

Precompiled driver DaemonSets select nodes on this label instead of the kernel label
itself. A kernel change would otherwise move the node from one DaemonSet to another at
once, and the DaemonSet controller would swap the driver under running GPU pods. The
upgrade controller writes it: right away where no driver runs yet (or auto upgrade is
off), and, once the node is cordoned and cleared, as the step that restarts its driver.
"""
