"""Which container runtime the GPU nodes run, and how GPU management pods reach their
GPUs under it.

The runtime is read from the nodes' `status.nodeInfo.containerRuntimeVersion`
(`containerd://2.1.4`, `cri-o://1.31.0`, `docker://27.3.1`): the one most GPU nodes run wins
(ties: containerd, then cri-o, then docker); with no GPU node reporting one,
`operator.defaultRuntime`.

Management pods (device plugin, DCGM, GFD, ...) get the GPUs in one of three ways, as in
the reference:

* the `nvidia` RuntimeClass (`operator.runtimeClass`), the usual way;
* CRI-O without CDI: the toolkit installs an OCI prestart hook instead of a runtime
  handler, so there is no RuntimeClass to name;
* the NRI plugin (`cdi.nriPluginEnabled`): the toolkit's plugin injects the CDI devices a
  pod annotation asks for, so pods name no RuntimeClass and carry that annotation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from components.operands._contract import GPUNode

RUNTIMES = ("containerd", "crio", "docker")
_PREFIXES: Mapping[str, str] = {
    "containerd": "containerd",
    "cri-o": "crio",
    "crio": "crio",
    "docker": "docker",
}
#: The annotation domain the toolkit's NRI plugin reads (one key per container).
NRI_ANNOTATION_DOMAIN = "nvidia.cdi.k8s.io"
#: The CDI device a management container gets through the NRI plugin: every GPU.
MANAGEMENT_CDI_DEVICE = "management.nvidia.com/gpu=all"


def node_runtime(version: str) -> str | None:
    """`containerd://2.1.4` -> `containerd`, `cri-o://1.31` -> `crio`; None if unknown."""
    scheme = version.split("://", 1)[0].strip().lower() if "://" in version else ""
    return _PREFIXES.get(scheme)


def detect_runtime(nodes: Sequence[GPUNode], *, default: str = "containerd") -> str:
    """The container runtime of the GPU nodes: `containerd`, `crio` or `docker`.

    The one most nodes run (ties: containerd, crio, docker); `default` when no node
    reports a runtime this operator knows.
    """
    counts = Counter(r for r in (node_runtime(n.container_runtime) for n in nodes) if r)
    if not counts:
        return default if default in RUNTIMES else "containerd"
    return max(RUNTIMES, key=lambda r: (counts[r], -RUNTIMES.index(r)))


def nri_annotations(container: str) -> dict[str, str]:
    """The pod annotation that has the NRI plugin give `container` every GPU."""
    return {f"{NRI_ANNOTATION_DOMAIN}/container.{container}": MANAGEMENT_CDI_DEVICE}
