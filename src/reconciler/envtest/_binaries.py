"""Where the Go-built etcd and kube-apiserver live.

`hack/build-binaries.sh` builds them from the official Go modules into a cache outside the
repository, one folder per component and version, so several checkouts share one build and
a version bump never mixes old and new binaries. (The simulator's own binaries, kwok and
the rest of the control plane, are found by `gpusim`.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reconciler.envtest._errors import BinaryMissingError

KUBERNETES_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"

_BUILD_HINT = "run `bash hack/build-binaries.sh` to build it"


def cache_root() -> Path:
    """The cache folder; `GPU_OPERATOR_CACHE` moves it (CI keeps it between runs)."""
    configured = os.environ.get("GPU_OPERATOR_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "gpu-operator"


def kubernetes_bin(base: Path) -> Path:
    """The folder of the Kubernetes binaries (kube-apiserver and its siblings) in `base`."""
    return base / f"kubernetes-{KUBERNETES_VERSION}"


@dataclass(frozen=True)
class Binaries:
    """Paths of the binaries a control plane starts (a subclass may add more, and
    `require` checks those too)."""

    etcd: Path
    kube_apiserver: Path

    @classmethod
    def from_cache(cls, root: Path | None = None) -> Binaries:
        base = (root or cache_root()) / "bin"
        return cls(
            etcd=base / f"etcd-{ETCD_VERSION}" / "etcd",
            kube_apiserver=kubernetes_bin(base) / "kube-apiserver",
        )

    def require(self, *names: str) -> None:
        """Fail with one sentence naming the first missing binary and how to build it."""
        for name in names:
            path: Path = getattr(self, name.replace("-", "_"))
            if not path.exists():
                raise BinaryMissingError(f"{name} is missing at {path}; {_BUILD_HINT}")
