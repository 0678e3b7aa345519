"""Small builders for the upgrade's views and for the objects they are read from."""

from __future__ import annotations

from typing import Any

from components.api import DriverUpgradePolicySpec, UpgradeState
from components.upgrade import (
    STATE_LABEL,
    STATE_SINCE,
    NodeView,
    PodView,
    format_time,
)

NOW = 1_800_000_000.0
NS = "gpu-operator"


def policy(**fields: Any) -> DriverUpgradePolicySpec:
    """An upgrade policy from camelCase fields, auto upgrade on unless said otherwise."""
    return DriverUpgradePolicySpec.from_dict({"autoUpgrade": True, **fields})


def node(
    name: str = "n1",
    state: UpgradeState = UpgradeState.UNKNOWN,
    *,
    since: float | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    skip: bool = False,
    kernel: str | None = "5.15.0-1-generic",
    pinned_kernel: str | None = None,
    **annotations: str,
) -> NodeView:
    ann = dict(annotations)
    if since is not None:
        ann[STATE_SINCE] = format_time(since)
    return NodeView(
        name=name,
        state=state,
        state_label=state.value if state is not UpgradeState.UNKNOWN else None,
        unschedulable=unschedulable,
        ready=ready,
        skip=skip,
        kernel=kernel,
        pinned_kernel=pinned_kernel,
        annotations=ann,
        has_annotations=bool(ann),
    )


def driver(
    revision: str = "new",
    *,
    name: str = "driver-abc",
    node_name: str = "n1",
    ready: bool = True,
    terminating: bool = False,
    created: float = NOW - 100,
    kernel: str | None = "5.15.0-1-generic",
    failing: bool = False,
    pinned: bool = False,
) -> PodView:
    return PodView(
        namespace=NS,
        name=name,
        uid=f"uid-{name}",
        node=node_name,
        labels={"app": "nvidia-driver-daemonset", "controller-revision-hash": revision},
        ready=ready,
        terminating=terminating,
        created=created,
        owner_kind="DaemonSet",
        owner_name="nvidia-driver-daemonset",
        owner_uid="ds-uid",
        revision=revision,
        kernel=kernel,
        kernel_recorded=kernel is not None and not pinned,
        failing=failing,
        pinned=pinned,
    )


def gpu_pod(
    name: str = "job-1",
    *,
    namespace: str = "work",
    owner: str = "ReplicaSet",
    terminating: bool = False,
    phase: str = "Running",
    local_storage: bool = False,
    labels: dict[str, str] | None = None,
    gpu: bool = True,
) -> PodView:
    return PodView(
        namespace=namespace,
        name=name,
        uid=f"uid-{name}",
        node="n1",
        labels=labels or {"app": name},
        phase=phase,
        terminating=terminating,
        ready=phase == "Running",
        gpu=gpu,
        owner_kind=owner,
        owner_name=f"{name}-owner" if owner else "",
        local_storage=local_storage,
    )


def validator(
    *, created: float, ready: bool = True, terminating: bool = False, name: str = "validator-x"
) -> PodView:
    return PodView(
        namespace=NS,
        name=name,
        uid=f"uid-{name}",
        node="n1",
        labels={"app": "nvidia-operator-validator"},
        created=created,
        ready=ready,
        terminating=terminating,
        owner_kind="DaemonSet",
        owner_name="nvidia-operator-validator",
    )


def node_object(name: str, state: str | None = None, **extra_labels: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, **extra_labels}
    if state is not None:
        labels[STATE_LABEL] = state
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "resourceVersion": "1", "uid": "u-" + name},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
