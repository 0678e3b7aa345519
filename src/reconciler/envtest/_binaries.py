"""Where the Go-built control-plane binaries live.

`hack/build-binaries.sh` builds them from the official Go modules into a cache outside the
repository, one folder per component and version, so several checkouts share one build and
a version bump never mixes old and new binaries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.envtest._errors import BinaryMissingError

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"

_BUILD_HINT = "run `bash hack/build-binaries.sh` to build it"


def cache_root() -> Path:
    """The cache folder; `GPU_OPERATOR_CACHE` moves it (CI keeps it between runs)."""
    configured = os.environ.get("GPU_OPERATOR_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "gpu-operator"


@dataclass(frozen=True)
class Binaries:
    """Paths of every binary a control plane may start."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    kwok_stages: Path

    @classmethod
    def from_cache(cls, root: Path | None = None) -> Binaries:
        base = (root or cache_root()) / "bin"
        k8s = base / f"kubernetes-{KUBERNETES_VERSION}"
        kwok = base / f"kwok-{KWOK_VERSION}"
        return cls(
            etcd=base / f"etcd-{ETCD_VERSION}" / "etcd",
            kube_apiserver=k8s / "kube-apiserver",
            kube_controller_manager=k8s / "kube-controller-manager",
            kube_scheduler=k8s / "kube-scheduler",
            kwok=kwok / "kwok",
            kwok_stages=kwok / "stages",
        )

    def require(self, *names: str) -> None:
        """Fail with one sentence naming the first missing binary and how to build it."""
        for name in names:
            path: Path = getattr(self, name.replace("-", "_"))
            if not path.exists():
                raise BinaryMissingError(f"{name} is missing at {path}; {_BUILD_HINT}")
