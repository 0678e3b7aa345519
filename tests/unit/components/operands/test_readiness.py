"""DaemonSet readiness by the reference's rules, and which nodes hold it back."""

from __future__ import annotations

from typing import Any

import pytest

from components.operands import daemonset_ready

pytestmark = pytest.mark.unit
UID = "ds-uid"


def ds(
    strategy: str = "RollingUpdate",
    *,
    desired: int = 2,
    unavailable: int = 0,
    updated: int = 2,
    available: int = 2,
    generation: int = 3,
    observed: int = 3,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "nvidia-driver-daemonset-ubuntu22.04",
            "uid": UID,
            "generation": generation,
        },
        "spec": {"updateStrategy": {"type": strategy}},
        "status": {
            "desiredNumberScheduled": desired,
            "numberUnavailable": unavailable,
            "updatedNumberScheduled": updated,
            "numberAvailable": available,
            "observedGeneration": observed,
        },
    }


def pod(
    node: str,
    revision: str = "new",
    *,
    phase: str = "Running",
    ready: bool = True,
    owner: str = UID,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"p-{node}",
        "labels": {"controller-revision-hash": revision},
        "ownerReferences": [{"kind": "DaemonSet", "uid": owner}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "c", "ready": ready}, {"name": "d", "ready": True}],
        },
    }


def revision(hash_: str, number: int, owner: str = UID) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"nvidia-driver-daemonset-ubuntu22.04-{hash_}",
            "labels": {"controller-revision-hash": hash_},
            "ownerReferences": [{"kind": "DaemonSet", "uid": owner}],
        },
        "revision": number,
    }


REVISIONS = [revision("old", 1), revision("new", 2)]


def test_nothing_to_run_is_ready() -> None:
    assert daemonset_ready(ds(desired=0, updated=0, available=0), [], []) == (True, [])
    assert daemonset_ready(ds("OnDelete", desired=0), [], []) == (True, [])


# --- RollingUpdate ------------------------------------------------------------------------


def test_rolling_update_all_updated_and_available() -> None:
    assert daemonset_ready(ds(), [pod("a"), pod("b")], []) == (True, [])


def test_rolling_update_unavailable_names_the_node() -> None:
    state = ds(unavailable=1, available=1)
    assert daemonset_ready(state, [pod("a"), pod("b", ready=False)], []) == (False, ["b"])


def test_rolling_update_not_yet_observed_new_generation() -> None:
    assert daemonset_ready(ds(generation=4, observed=3), [pod("a"), pod("b")], []) == (False, [])


def test_rolling_update_in_progress() -> None:
    assert daemonset_ready(ds(updated=1), [pod("a"), pod("b")], [])[0] is False


# --- OnDelete (the driver) ----------------------------------------------------------------


def test_on_delete_all_pods_on_newest_revision_running_and_ready() -> None:
    assert daemonset_ready(ds("OnDelete"), [pod("a"), pod("b")], REVISIONS) == (True, [])


def test_on_delete_old_revision_pod_is_not_ready_even_if_counts_say_so() -> None:
    # The DaemonSet controller counts an OnDelete pod as available while it runs old code.
    ready, nodes = daemonset_ready(ds("OnDelete"), [pod("a"), pod("b", "old")], REVISIONS)
    assert (ready, nodes) == (False, ["b"])


def test_on_delete_newest_revision_is_the_highest_number_not_the_list_order() -> None:
    revisions = [revision("new", 2), revision("old", 1)]
    assert daemonset_ready(ds("OnDelete"), [pod("a"), pod("b")], revisions) == (True, [])


def test_on_delete_pod_not_running_or_container_not_ready() -> None:
    pods = [pod("a", phase="Pending"), pod("b", ready=False)]
    assert daemonset_ready(ds("OnDelete"), pods, REVISIONS) == (False, ["a", "b"])


def test_on_delete_terminating_pod_is_not_ready() -> None:
    assert daemonset_ready(ds("OnDelete"), [pod("a"), pod("b", deleting=True)], REVISIONS) == (
        False,
        ["b"],
    )


def test_on_delete_missing_pod_is_not_ready() -> None:
    assert daemonset_ready(ds("OnDelete"), [pod("a")], REVISIONS) == (False, [])


def test_on_delete_ignores_other_daemonsets_pods_and_revisions() -> None:
    other = "other-uid"
    pods = [pod("a"), pod("b"), pod("c", "x", ready=False, owner=other)]
    revisions = [*REVISIONS, revision("zzz", 9, owner=other)]
    assert daemonset_ready(ds("OnDelete"), pods, revisions) == (True, [])


def test_on_delete_hash_from_the_revision_name_when_unlabelled() -> None:
    unlabelled = {
        "metadata": {
            "name": "nvidia-driver-daemonset-ubuntu22.04-new",
            "ownerReferences": [{"uid": UID}],
        },
        "revision": 5,
    }
    assert daemonset_ready(ds("OnDelete"), [pod("a"), pod("b")], [unlabelled]) == (True, [])


def test_on_delete_without_revisions_uses_the_status_counts() -> None:
    assert daemonset_ready(ds("OnDelete"), [pod("a"), pod("b")], []) == (True, [])
    assert daemonset_ready(ds("OnDelete", updated=1), [pod("a"), pod("b")], [])[0] is False


def test_on_delete_unavailable_count() -> None:
    state = ds("OnDelete", unavailable=1)
    assert daemonset_ready(state, [pod("a"), pod("b")], REVISIONS)[0] is False


@pytest.mark.parametrize("strategy", ["RollingUpdate", "OnDelete"])
def test_a_daemonset_the_controller_has_not_seen_yet_is_not_ready(strategy: str) -> None:
    # Just created: no status at all, so "nothing to run" must not read as ready.
    fresh = ds(strategy, desired=0, updated=0, available=0, generation=1, observed=0)
    fresh["status"] = {}
    assert daemonset_ready(fresh, [], []) == (False, [])
