"""The GPU operator's own kinds, named by the controllers and the upgrade alike."""

from __future__ import annotations

from typing import Final

from reconciler import GVK

CLUSTER_POLICY: Final = GVK("nvidia.com", "v1", "ClusterPolicy")
NVIDIA_DRIVER: Final = GVK("nvidia.com", "v1alpha1", "NVIDIADriver")

SCHEDULED_PODS: Final = "spec.nodeName!="
"""The field selector of the operator's pod informer: pods bound to a node. Every reader of
a cached pod asks about pods on nodes (readiness per node, drains, MIG changes, takeover,
the driver's upgrade); a pod not yet bound is not on any. Left out, the API server never
sends or encodes the first event of each DaemonSet pod, created before the scheduler binds
it: a third of the pod events of a rollout (7,000 at 1,000 GPU nodes). A pod enters the
watch as added when it is bound, and a binding is never undone."""
