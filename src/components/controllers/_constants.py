"""Names shared by the controllers: kinds, the field manager, the lease.

Label keys live in `components.api` (the operands and the upgrade read them too).
"""

from __future__ import annotations

from typing import Final

from components.kinds import CACHED_PODS as CACHED_PODS
from components.kinds import CLUSTER_POLICY as CLUSTER_POLICY
from components.kinds import GPU_CLUSTER as GPU_CLUSTER
from components.kinds import NVIDIA_DRIVER as NVIDIA_DRIVER
from components.kinds import RESOURCE_CLAIM as RESOURCE_CLAIM
from components.kinds import SCHEDULED_PODS as SCHEDULED_PODS
from reconciler.kinds import CONTROLLER_REVISION as CONTROLLER_REVISION
from reconciler.kinds import CRD as CRD
from reconciler.kinds import DAEMONSET as DAEMONSET
from reconciler.kinds import NODE as NODE
from reconciler.kinds import PDB as PDB
from reconciler.kinds import POD as POD

FIELD_MANAGER: Final = "gpu-operator"
"""The one field manager every server-side apply and patch is sent with."""

HASH_ANNOTATION: Final = "nvidia.com/last-applied-hash"
"""Records the hash of the desired object on what we apply (the reference's name)."""

DEFAULT_NAMESPACE: Final = "gpu-operator"
LEASE_NAME: Final = "53822513.nvidia.com"
"""The reference's leader-election lease, so ours and theirs never lead at once."""

# -- kinds ----------------------------------------------------------------------------


SERVICE_MONITOR_CRD: Final = "servicemonitors.monitoring.coreos.com"
