"""A real kube-apiserver + etcd for tests (our envtest, like controller-runtime's).

Never a fake: the binaries are built from the official Go modules by
`hack/build-binaries.sh` and cached outside the repository. The simulated cluster (`gpusim`)
adds its kubelets, scheduler and controllers on top of this control plane.
"""

from reconciler.envtest._binaries import (
    ETCD_VERSION,
    KUBERNETES_VERSION,
    Binaries,
    cache_root,
    kubernetes_bin,
)
from reconciler.envtest._controlplane import ControlPlane, free_port
from reconciler.envtest._errors import BinaryMissingError, ControlPlaneError
from reconciler.envtest._lifecycle import Lifecycle
from reconciler.envtest._process import Process, stop_together

__all__ = [
    "ETCD_VERSION",
    "KUBERNETES_VERSION",
    "Binaries",
    "BinaryMissingError",
    "ControlPlane",
    "ControlPlaneError",
    "Lifecycle",
    "Process",
    "cache_root",
    "free_port",
    "kubernetes_bin",
    "stop_together",
]
