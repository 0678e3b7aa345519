"""The GPU operator's own kinds, named by the controllers and the upgrade alike."""

from __future__ import annotations

from typing import Final

from reconciler import GVK

CLUSTER_POLICY: Final = GVK("nvidia.com", "v1", "ClusterPolicy")
NVIDIA_DRIVER: Final = GVK("nvidia.com", "v1alpha1", "NVIDIADriver")
