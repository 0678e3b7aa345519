"""A real kube-apiserver + etcd for tests and the simulated cluster (our envtest).

Never a fake: the binaries are built from the official Go modules by
`hack/build-binaries.sh` and cached outside the repository.
"""

from reconciler.envtest._binaries import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    Binaries,
    cache_root,
)
from reconciler.envtest._controlplane import ControlPlane, free_port
from reconciler.envtest._errors import AlreadyRunningError, BinaryMissingError, ControlPlaneError
from reconciler.envtest._process import Process

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "AlreadyRunningError",
    "Binaries",
    "BinaryMissingError",
    "ControlPlane",
    "ControlPlaneError",
    "Process",
    "cache_root",
    "free_port",
]
