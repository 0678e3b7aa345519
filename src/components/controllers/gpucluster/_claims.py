"""What holds a GPUCluster that is being deleted: the ResourceClaims allocated on its
GPUs (driver `gpu.nvidia.com`). Deleting the stack under them would take away the kubelet
plugin that must unprepare them, and the pods holding them would hang in Terminating; so
the GPUCluster keeps its finalizer (the reference's) until they are gone.

The stack's own claim consumer, the DRA validator DaemonSet, goes first (its claims go
with its pods), as the reference drains it before releasing the GPUCluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from components.api import GPU_DRA_DRIVER
from reconciler import Object, name_of, namespace_of

MAX_NAMED = 10


def on_gpus(claim: Object) -> bool:
    """The claim is allocated, on at least one device of NVIDIA's GPU driver."""
    allocation: Any = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or ()
    return any(r.get("driver") == GPU_DRA_DRIVER for r in results)


def holding(claims: Iterable[Object]) -> list[str]:
    """`namespace/name` of every claim allocated on GPUs, sorted."""
    return sorted(f"{namespace_of(c)}/{name_of(c)}" for c in claims if on_gpus(c))


def named(claims: Sequence[str]) -> str:
    """The claims, the first few by name."""
    shown = ", ".join(claims[:MAX_NAMED])
    more = len(claims) - MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown
