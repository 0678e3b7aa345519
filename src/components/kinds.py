"""The GPU operator's own kinds, named by the controllers and the upgrade alike."""

from __future__ import annotations

from typing import Final

from components.api import COMPONENT_LABEL
from reconciler import GVK

CLUSTER_POLICY: Final = GVK("nvidia.com", "v1", "ClusterPolicy")
NVIDIA_DRIVER: Final = GVK("nvidia.com", "v1alpha1", "NVIDIADriver")
GPU_CLUSTER: Final = GVK("nvidia.com", "v1alpha1", "GPUCluster")
RESOURCE_CLAIM: Final = GVK("resource.k8s.io", "v1", "ResourceClaim")

SCHEDULED_PODS: Final = "spec.nodeName!="
"""The field selector of the operator's pod informer: pods bound to a node. Every reader of
a cached pod asks about pods on nodes (readiness per node, drains, MIG changes, takeover,
the driver's upgrade); a pod not yet bound is not on any. Left out, the API server never
sends or encodes the first event of each DaemonSet pod, created before the scheduler binds
it: a third of the pod events of a rollout (7,000 at 1,000 GPU nodes). A pod enters the
watch as added when it is bound, and a binding is never undone."""

PODS_CACHED_OF: Final = frozenset({"state-driver", "state-operator-validation"})
"""The operands whose pods the operator caches: the driver's (the upgrade replaces them,
readiness of an `OnDelete` DaemonSet is judged pod by pod) and the validator's (the upgrade
waits for them after a driver restart)."""

PODS_NOT_CACHED_OF: Final = frozenset(
    {
        "gpu-feature-discovery",
        "state-cc-manager",
        "state-container-toolkit",
        "state-dcgm",
        "state-dcgm-exporter",
        "state-device-plugin",
        "state-kata-manager",
        "state-mig-manager",
        "state-mps-control-daemon",
        "state-node-agent",
        "state-node-status-exporter",
        "state-sandbox-device-plugin",
        "state-sandbox-validation",
        "state-vfio-manager",
        "state-vgpu-device-manager",
        "state-vgpu-manager",
    }
)
"""Every other operand with pods: its readiness is its DaemonSet's counts, and no
controller reads its pods. At 1,000 GPU nodes their pods brought about two thirds of the
~30,000 pod events of a rollout, and taking events in was half the operator's CPU. The
nodes where one is not ready are named by a LIST when its counts stand still
(`components.controllers._readiness.UnreadyNames`)."""

CACHED_PODS: Final = f"{COMPONENT_LABEL} notin ({','.join(sorted(PODS_NOT_CACHED_OF))})"
"""The label selector of the operator's pod informer: every pod but those of
`PODS_NOT_CACHED_OF` (a pod without the label, any user's, matches)."""
