"""Who holds the node's GPUs, by the node agent's process list, beyond the pods that ask.

A pod that sees the GPUs through its environment (`NVIDIA_VISIBLE_DEVICES=all`, a
privileged container) requests no GPU resource, yet its processes hold the driver open as
much as any GPU pod's: the old kernel module cannot unload under them, and the new
driver pod fails to come up. The node agent lists every compute process with the pod
its cgroup names (`components.api.GPU_PROCESSES_ANNOTATION`); with it, such a pod is
cleared like a GPU pod, and a wait names it, or names a process outside any pod (which
no clearing can remove: only an admin can).

Only where the node agent runs (`NodeContext.agent`): elsewhere no list is current enough
to act on. Pods in the driver's namespace (the operands: the driver manages those) are
never taken for holders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from components.api import GPU_PROCESSES_ANNOTATION, GpuProcessEntry, gpu_processes
from components.upgrade._pods import PodView
from components.upgrade._step import NodeContext


def listed(ctx: NodeContext) -> tuple[GpuProcessEntry, ...]:
    """The node agent's processes on the node (none without the agent)."""
    if not ctx.agent or not ctx.node.processes:
        return ()
    return tuple(gpu_processes({GPU_PROCESSES_ANNOTATION: ctx.node.processes}))


def _owns(pod: PodView, entry: GpuProcessEntry) -> bool:
    if entry.pod_uid and pod.uid:
        return entry.pod_uid == pod.uid
    return entry.pod_key == (pod.namespace, pod.name)


def with_holders(ctx: NodeContext) -> NodeContext:
    """`ctx` with each pod that owns a listed process and requests no GPU counted as a
    GPU pod (so clearing takes it, and the driver never restarts under it)."""
    processes = listed(ctx)
    if not processes:
        return ctx
    operands = ctx.driver.namespace if ctx.driver is not None else None
    pods = [
        replace(p, gpu=True, holds_unrequested=True)
        if not p.gpu and p.namespace != operands and any(_owns(p, e) for e in processes)
        else p
        for p in ctx.pods
    ]
    return replace(ctx, pods=pods)


def holders_note(ctx: NodeContext, pods: Sequence[PodView], limit: int = 3) -> str:
    """`; work/x uses GPU 0 (process 1234) without requesting one` for the pods of `pods`
    that hold a GPU unrequested, and each process outside any pod; "" when none."""
    processes = listed(ctx)
    if not processes:
        return ""
    notes: list[str] = []
    for pod in pods:
        if not pod.holds_unrequested:
            continue
        mine = [e for e in processes if _owns(pod, e)]
        if mine:
            notes.append(f"{pod.key} uses {_gpus(mine)} without requesting one")
    notes.extend(
        f"process {e.pid} outside any pod holds GPU {e.index}"
        for e in processes
        if not e.pod_uid and not e.pod
    )
    if not notes:
        return ""
    more = f" and {len(notes) - limit} more" if len(notes) > limit else ""
    return "; " + "; ".join(notes[:limit]) + more


def _gpus(entries: Sequence[GpuProcessEntry]) -> str:
    pairs = sorted({(e.index, e.pid) for e in entries})
    indices = sorted({i for i, _ in pairs})
    pids = ", ".join(str(p) for _, p in pairs[:3])
    which = f"GPU {indices[0]}" if len(indices) == 1 else "GPUs " + ", ".join(map(str, indices))
    return f"{which} (process {pids})" if len(pairs) == 1 else f"{which} (processes {pids})"
