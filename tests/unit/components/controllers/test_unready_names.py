"""The nodes of an operand whose pods are not cached are named by one LIST once its
DaemonSet's counts stand still, and the names stand until the counts change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from components.controllers._readiness import STALL_SECONDS, UnreadyNames
from components.kinds import CACHED_PODS, PODS_CACHED_OF, PODS_NOT_CACHED_OF
from components.operands import OPERANDS
from components.upgrade import parse_selector
from reconciler import GVK, Object

pytestmark = pytest.mark.unit

UID = "ds-uid"


def daemonset(*, ready: int, desired: int = 3, observed: int = 1) -> Object:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "nvidia-device-plugin-daemonset",
            "namespace": "gpu-operator",
            "uid": UID,
            "generation": 1,
        },
        "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin-daemonset"}}},
        "status": {
            "observedGeneration": observed,
            "desiredNumberScheduled": desired,
            "currentNumberScheduled": desired,
            "updatedNumberScheduled": desired,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": desired - ready,
        },
    }


def pod(node: str, *, ready: bool) -> Object:
    return {
        "metadata": {
            "name": f"plugin-{node}",
            "namespace": "gpu-operator",
            "ownerReferences": [{"kind": "DaemonSet", "uid": UID, "controller": True}],
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


class Server:
    """The pods a LIST of the DaemonSet's selector returns, and the LISTs asked."""

    def __init__(self) -> None:
        self.pods: list[Object] = []
        self.lists: list[str | None] = []

    async def list_live_pages(
        self, gvk: GVK, *, label_selector: str | None = None, **_: Any
    ) -> AsyncIterator[list[Object]]:
        self.lists.append(label_selector)
        for start in range(0, len(self.pods), 2):  # two a page: the pages are put together
            yield self.pods[start : start + 2]

    def list(self, gvk: GVK, **_: Any) -> list[Object]:
        return []  # no ControllerRevisions: a RollingUpdate DaemonSet needs none


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server() -> Server:
    return Server()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def names(server: Server, clock: Clock) -> UnreadyNames:
    return UnreadyNames(server, clock)  # type: ignore[arg-type]


async def test_a_stalled_daemonset_is_named_once_and_its_names_stand_until_its_counts_change(
    names: UnreadyNames, server: Server, clock: Clock
) -> None:
    server.pods = [pod("a", ready=True), pod("b", ready=False), pod("c", ready=False)]
    ds = daemonset(ready=1)

    # Still moving, as far as anyone knows: no LIST yet, the policy comes back at the stall.
    assert await names.refresh([ds]) == STALL_SECONDS
    assert (server.lists, names.names(ds)) == ([], [])

    clock.now += STALL_SECONDS
    assert await names.refresh([ds]) is None
    assert server.lists == ["app=nvidia-device-plugin-daemonset"]
    assert names.names(ds) == ["b", "c"]

    # The same counts a minute later: the names stand, no second LIST.
    clock.now += 60
    assert await names.refresh([ds]) is None
    assert (len(server.lists), names.names(ds)) == (1, ["b", "c"])

    # Node b's pod turns ready: the controller recounts, the old names no longer hold.
    server.pods[1] = pod("b", ready=True)
    moved = daemonset(ready=2)
    assert names.names(moved) == []
    assert await names.refresh([moved]) == STALL_SECONDS
    clock.now += STALL_SECONDS
    await names.refresh([moved])
    assert (len(server.lists), names.names(moved)) == (2, ["c"])


async def test_a_ready_daemonset_or_one_not_yet_observed_is_never_listed(
    names: UnreadyNames, server: Server, clock: Clock
) -> None:
    ready, unobserved = daemonset(ready=3), daemonset(ready=0, observed=0)
    for _ in range(3):
        assert await names.refresh([ready, unobserved]) is None
        clock.now += STALL_SECONDS
    assert server.lists == []


def test_every_operand_with_pods_has_them_cached_or_judged_by_counts() -> None:
    """A new operand must be put in one of the two sets: in neither, its pods would be
    cached (the informer's selector lets them in) while nothing says they must be."""
    with_pods = {op.name for op in OPERANDS if op.deploy_label}  # a DaemonSet selects on it
    assert PODS_CACHED_OF.isdisjoint(PODS_NOT_CACHED_OF)
    assert with_pods == PODS_CACHED_OF | PODS_NOT_CACHED_OF


def test_the_pod_informer_leaves_out_only_the_pods_judged_by_counts() -> None:
    cached = parse_selector(CACHED_PODS)
    label = "nvidia.com/gpu-operator.component"
    assert not cached({label: "state-device-plugin", "app": "nvidia-device-plugin-daemonset"})
    assert cached({label: "state-driver", "app": "nvidia-driver-daemonset"})
    assert cached({label: "state-operator-validation", "app": "nvidia-operator-validator"})
    assert cached({"app": "my-training-job"})  # a user's GPU pod, for the drain
