"""Names shared by the controllers: kinds, label keys, the field manager.

Label keys and values are the reference operator's, so manifests, node selectors and
dashboards written for it keep working.
"""

from __future__ import annotations

from typing import Final

from components import api
from components.kinds import CLUSTER_POLICY as CLUSTER_POLICY
from components.kinds import NVIDIA_DRIVER as NVIDIA_DRIVER
from reconciler import CONTROLLER_REVISION as CONTROLLER_REVISION
from reconciler import CRD as CRD
from reconciler import DAEMONSET as DAEMONSET
from reconciler import NODE as NODE
from reconciler import POD as POD

FIELD_MANAGER: Final = "gpu-operator"
"""The one field manager every server-side apply and patch is sent with."""

HASH_ANNOTATION: Final = "nvidia.com/last-applied-hash"
"""Records the hash of the desired object on what we apply (the reference's name)."""

DEFAULT_NAMESPACE: Final = "gpu-operator"
LEASE_NAME: Final = "53822513.nvidia.com"
"""The reference's leader-election lease, so ours and theirs never lead at once."""

# -- kinds ----------------------------------------------------------------------------


SERVICE_MONITOR_CRD: Final = "servicemonitors.monitoring.coreos.com"

# -- labels on what we render -----------------------------------------------------------

MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "gpu-operator"
COMPONENT: Final = "nvidia.com/gpu-operator.component"
NVIDIA_DRIVER_LABEL: Final = api.NVIDIA_DRIVER_OWNER_LABEL

# -- node labels read -------------------------------------------------------------------

NFD_PREFIX: Final = "feature.node.kubernetes.io/"
NFD_GPU_LABELS: Final = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
KERNEL_LABEL: Final = api.KERNEL_LABEL
OS_ID_LABEL: Final = api.OS_ID_LABEL
OS_VERSION_LABEL: Final = api.OS_VERSION_LABEL
MIG_CAPABLE_LABEL: Final = api.MIG_CAPABLE_LABEL

# -- node labels written ----------------------------------------------------------------

GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"
DEPLOY_PREFIX: Final = "nvidia.com/gpu.deploy."
OPERANDS_OPT_OUT_LABEL: Final = "nvidia.com/gpu.deploy.operands"
DRIVER_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.driver"
MIG_MANAGER_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.mig-manager"
