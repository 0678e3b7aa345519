"""Clearing a node for a MIG change: when it starts, which GPU pods are evicted, waited for
or reported, and the sentences people read (Events, the ClusterPolicy condition)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from components.api import GpuProcessEntry, MIGPodDeletionSpec
from components.controllers._mig_change import (
    BACKOFF_MAX,
    HostProcess,
    backoff,
    blocked_message,
    change_pending,
    clearing,
    evicted_message,
    mig_managed,
    mig_pod_deletion,
    node_evicted_message,
    policy_message,
    refusal,
)
from components.controllers._mig_clearing import _node_changed
from components.controllers._status import policy_status
from components.controllers._status_writer import status_patch
from components.upgrade import Blocker, PdbView, PodView
from tests.unit.components.controllers.test_status import T0, T1, findings

pytestmark = pytest.mark.unit

GPU_LIMITS = {"limits": {"nvidia.com/gpu": "1"}}


def pod(name: str, **fields: Any) -> PodView:
    base: dict[str, Any] = {
        "namespace": "ml",
        "name": name,
        "uid": f"uid-{name}",
        "node": "n1",
        "labels": {"app": "train"},
        "gpu": True,
        "owner_kind": "ReplicaSet",
        "owner_name": "train-5d9",
    }
    base.update(fields)
    return PodView(**base)


def test_only_a_pending_state_with_a_requested_config_means_clear_the_node() -> None:
    config = "nvidia.com/mig.config"
    state = "nvidia.com/mig.config.state"
    assert change_pending({config: "all-1g.10gb", state: "pending"})
    # success/failed/rebooting, or no state yet: the MIG manager has not found a change.
    for value in ("success", "failed", "rebooting"):
        assert not change_pending({config: "all-1g.10gb", state: value})
    assert not change_pending({config: "all-1g.10gb"})
    assert not change_pending({state: "pending"})


def test_gpu_pods_are_evicted_terminating_ones_waited_for_others_left_alone() -> None:
    train = pod("train-0")
    leaving = pod("train-1", terminating=True)
    cpu = pod("web", gpu=False)
    done = pod("job-0", phase="Succeeded")
    plan = clearing([train, leaving, cpu, done])
    assert plan.evict == (train,)
    assert plan.waiting == (leaving,)
    assert plan.blocked == () and not plan.drain_refused


def test_a_bare_or_emptydir_gpu_pod_refuses_the_node_as_it_refuses_kubectl_drain() -> None:
    train = pod("train-0")
    bare = pod("notebook", owner_kind="", owner_name="")
    scratch = pod("scratch", local_storage=True)
    unknown = pod("unread", volumes_known=False)
    leaving = pod("train-1", terminating=True)
    plan = clearing([train, bare, scratch, unknown, leaving])
    # Nothing is evicted, not even the pod free to go; each pod that holds the node is named.
    assert plan.evict == ()
    assert plan.held == (train,)
    assert plan.waiting == (leaving,)
    assert [b.pod for b in plan.blocked if isinstance(b, Blocker)] == [bare, scratch, unknown]
    assert plan.drain_refused and not plan.clear
    message = blocked_message("all-1g.10gb", plan.blocked, refused=plan.drain_refused)
    assert message == (
        "MIG change to all-1g.10gb waits for GPU pods to leave: ml/notebook (not managed by "
        "a controller; set migManager.podDeletion.force to remove it); ml/scratch (uses "
        "emptyDir, whose data would be lost; set migManager.podDeletion.deleteEmptyDir); "
        "ml/unread (uses emptyDir, whose data would be lost; set "
        "migManager.podDeletion.deleteEmptyDir); no GPU pod is evicted while these block"
    )


def test_the_policy_lets_bare_and_emptydir_gpu_pods_go_each_on_its_own_field() -> None:
    train = pod("train-0")
    bare = pod("notebook", owner_kind="", owner_name="")
    scratch = pod("scratch", local_storage=True)
    pods = [train, bare, scratch]
    forced = clearing(pods, MIGPodDeletionSpec(force=True))
    assert forced.evict == () and [b.pod for b in forced.blocked] == [scratch]
    emptied = clearing(pods, MIGPodDeletionSpec(delete_empty_dir=True))
    assert emptied.evict == () and [b.pod for b in emptied.blocked] == [bare]
    both = clearing(pods, MIGPodDeletionSpec(force=True, delete_empty_dir=True))
    assert both.evict == (train, bare, scratch)
    assert both.blocked == () and both.held == ()


def test_which_policy_lets_a_mig_change_evict_and_what() -> None:
    def policy(manager: Any = None, **meta: Any) -> dict[str, Any]:
        spec = {} if manager is None else {"migManager": manager}
        return {"metadata": {"name": "p", **meta}, "spec": spec}

    assert mig_pod_deletion(None) is None
    assert mig_pod_deletion(policy({"enabled": False})) is None
    # The MIG manager is on unless turned off; drain's rules unless the policy says more.
    assert mig_pod_deletion(policy()) == MIGPodDeletionSpec()
    assert mig_pod_deletion(policy({"enabled": True})) == MIGPodDeletionSpec()
    allowed = mig_pod_deletion(policy({"podDeletion": {"force": True}}))
    assert allowed is not None and allowed.force and not allowed.delete_empty_dir
    # Not a policy the API server accepts: nothing beyond drain's rules.
    assert mig_pod_deletion(policy({"podDeletion": {"force": "yes"}})) == MIGPodDeletionSpec()


def test_only_a_node_our_mig_manager_runs_on_is_cleared() -> None:
    deploy = "nvidia.com/gpu.deploy.mig-manager"
    capable = {"nvidia.com/mig.capable": "true"}
    assert mig_managed({**capable, deploy: "true"})
    assert not mig_managed(capable)  # not (yet) labelled for the MIG manager
    assert not mig_managed({**capable, deploy: "false"})
    assert not mig_managed({deploy: "true", "nvidia.com/mig.capable": "false"})
    assert not mig_managed({**capable, deploy: "true", "nvidia.com/gpu.deploy.operands": "false"})


def test_a_daemonset_or_static_gpu_pod_cannot_be_cleared_and_is_reported() -> None:
    ds = pod("agent-x", owner_kind="DaemonSet", owner_name="gpu-agent")
    static = pod("static-x", mirror=True, owner_kind="Node", owner_name="n1")
    train = pod("train-0")
    plan = clearing([ds, static, train])
    # Skipped as kubectl drain skips them: the others still go, the change waits for them.
    assert plan.evict == (train,) and not plan.drain_refused
    assert [b.pod for b in plan.blocked] == [ds, static]
    assert "DaemonSet gpu-agent would recreate it" in str(plan.blocked[0])
    assert "static pod" in str(plan.blocked[1])


def process(pid: int, pod: PodView | None = None, index: int = 0) -> GpuProcessEntry:
    return GpuProcessEntry(
        gpu=f"GPU-{index}",
        index=index,
        pid=pid,
        mig=None,
        pod_uid=pod.uid if pod else "",
        pod=pod.key if pod else "",
    )


def test_with_the_agent_a_pod_owning_a_gpu_process_is_evicted_without_a_gpu_request() -> None:
    # NVIDIA_VISIBLE_DEVICES=all: no nvidia.com/gpu request, yet its process is on the GPU.
    sneaky = pod("all-gpus", gpu=False)
    web = pod("web", gpu=False)
    assert clearing([sneaky, web]).evict == ()  # without the agent nobody knows
    plan = clearing([sneaky, web], processes=[process(4242, sneaky)])
    assert plan.evict == (replace(sneaky, gpu=True),)
    assert plan.blocked == ()
    assert not plan.clear


def test_a_process_matched_by_name_alone_still_names_its_pod() -> None:
    # The agent may know a pod's name without its UID (or the other way round).
    sneaky = pod("all-gpus", gpu=False)
    entry = replace(process(7, sneaky), pod_uid="")
    assert [p.name for p in clearing([sneaky], processes=[entry]).evict] == ["all-gpus"]


def test_a_host_process_blocks_the_change_and_is_named() -> None:
    plan = clearing([], processes=[process(1234, index=1)])
    assert plan.evict == ()
    assert len(plan.blocked) == 1
    assert isinstance(plan.blocked[0], HostProcess)
    message = blocked_message("all-1g.10gb", plan.blocked)
    assert "process 1234 on GPU 1" in message
    assert "stop it on the host" in message
    assert not plan.clear


def test_the_node_is_clear_only_once_the_agent_lists_no_process() -> None:
    train = pod("train-0")
    # The pod is gone from the API, its process not yet from the GPU: wait, blame nobody.
    lingering = clearing([], processes=[process(99, train)])
    assert (lingering.evict, lingering.waiting, lingering.blocked) == ((), (), ())
    assert not lingering.clear
    assert clearing([], processes=[]).clear
    # Without the agent (None) only the pods say.
    assert clearing([]).clear


def test_a_pod_just_evicted_is_not_asked_again_while_the_cache_lags() -> None:
    train = pod("train-0")
    plan = clearing([train], recently_evicted={"uid-train-0"})
    assert plan.evict == () and plan.waiting == (train,)


def test_a_refusal_names_the_budget_the_cache_knows_else_the_server_reason() -> None:
    train = pod("train-0")
    budget = PdbView("ml", "train", {"matchLabels": {"app": "train"}}, disruptions_allowed=0)
    other = PdbView("ml", "web", {"matchLabels": {"app": "web"}}, disruptions_allowed=0)
    named = refusal(train, [other, budget], "Cannot evict pod")
    assert str(named) == ("ml/train-0 (PodDisruptionBudget ml/train allows no disruption now)")
    assert str(refusal(train, [other], "Cannot evict pod")) == "ml/train-0 (Cannot evict pod)"


def test_the_blocked_message_names_the_config_and_the_first_blockers() -> None:
    assert blocked_message("all-1g.10gb", []) == ""
    blockers = [refusal(pod(f"train-{i}"), [], "refused") for i in range(5)]
    assert blocked_message("all-1g.10gb", blockers) == (
        "MIG change to all-1g.10gb waits for GPU pods to leave: ml/train-0 (refused); "
        "ml/train-1 (refused); ml/train-2 (refused) and 2 more"
    )


def test_events_say_which_node_which_config_and_that_the_eviction_api_was_used() -> None:
    text = evicted_message("gpu-node-1", "all-1g.10gb")
    assert "gpu-node-1" in text and "all-1g.10gb" in text and "Eviction API" in text
    pods = [pod("train-0"), pod("train-1")]
    assert node_evicted_message("all-balanced", pods) == (
        "evicted ml/train-0, ml/train-1 for the MIG change to all-balanced"
    )


def test_refused_evictions_back_off_doubling_to_a_cap() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(50) == BACKOFF_MAX


def test_the_policy_condition_names_each_blocked_node_and_leaves_the_state_alone() -> None:
    blocked = {"n2": "MIG change to all-1g.10gb waits ...", "n1": "MIG change to x waits ..."}
    status = policy_status(None, findings(mig_blocked=blocked), now=T0)
    assert status.state == "ready"
    cond = status.condition("MIGChangeBlocked")
    assert cond is not None
    assert (cond.status, cond.reason) == ("True", "EvictionBlocked")
    assert cond.message == policy_message(blocked)
    assert cond.message.startswith("n1: MIG change to x waits ...; n2: ")
    # Gone once nothing blocks, and that is a status write.
    cleared = policy_status(status.to_dict(defaults=True), findings(), now=T1)
    assert cleared.condition("MIGChangeBlocked") is None
    assert status_patch(status.to_dict(defaults=True), cleared) is not None


def test_the_policy_message_stops_after_a_few_nodes_and_counts_the_rest() -> None:
    blocked = {f"n{i}": "waits" for i in range(8)}
    assert policy_message(blocked, limit=2) == "n0: waits; n1: waits; and 6 more nodes"


def test_a_waiting_node_is_looked_at_again_when_its_process_list_changes() -> None:
    def node(state: str, listed: str | None) -> dict[str, Any]:
        annotations = {"nvidia.com/gpu-operator.compute-processes": listed} if listed else {}
        labels = {"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": state}
        return {"metadata": {"name": "n1", "labels": labels, "annotations": annotations}}

    busy = '[{"gpu": "GPU-0", "index": 0, "pid": 7, "podUID": "", "pod": ""}]'
    assert _node_changed(node("pending", busy), node("pending", None))
    assert not _node_changed(node("pending", busy), node("pending", busy))
    # Not waiting for a change: the agent's updates are none of this controller's business.
    assert not _node_changed(node("success", busy), node("success", None))
