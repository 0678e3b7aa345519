"""The binaries a simulated cluster runs beyond envtest's etcd and kube-apiserver.

kube-controller-manager and kube-scheduler come from the same Kubernetes build as the
apiserver; kwok (the simulated kubelets) and its standard stage configs have their own
folder. `hack/build-binaries.sh` builds all of them into the same cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.envtest import Binaries, cache_root, kubernetes_bin

KWOK_VERSION = "v0.8.0"
REGISTRY_VERSION = "v0.22.1"
"""go-containerregistry's in-memory OCI registry (`hack/go/registry`)."""


@dataclass(frozen=True)
class SimBinaries(Binaries):
    """envtest's binaries plus the simulator's; `require` checks any of them by name."""

    kube_controller_manager: Path = Path()
    kube_scheduler: Path = Path()
    kwok: Path = Path()
    kwok_stages: Path = Path()
    registry: Path = Path()

    @classmethod
    def from_cache(cls, root: Path | None = None) -> SimBinaries:
        base = (root or cache_root()) / "bin"
        plane = Binaries.from_cache(root)
        kubernetes = kubernetes_bin(base)
        kwok = base / f"kwok-{KWOK_VERSION}"
        return cls(
            etcd=plane.etcd,
            kube_apiserver=plane.kube_apiserver,
            kube_controller_manager=kubernetes / "kube-controller-manager",
            kube_scheduler=kubernetes / "kube-scheduler",
            kwok=kwok / "kwok",
            kwok_stages=kwok / "stages",
            registry=base / f"registry-{REGISTRY_VERSION}" / "registry",
        )
