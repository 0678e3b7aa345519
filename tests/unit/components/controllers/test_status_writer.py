"""The status writer judges "changed" against the status as we last wrote it, not against a
cache that has not yet seen that write."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.controllers._status import Findings, OperandReadiness, policy_status
from components.controllers._status_writer import StatusWriter
from reconciler import GVK, Object

pytestmark = pytest.mark.unit

CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
T0 = "2026-08-01T10:00:00Z"


class FakeServer:
    """The API server's side of status patches: the stored object, a new resourceVersion
    per write, and the patch applied as a merge of `status`."""

    def __init__(self, obj: Object) -> None:
        self.stored = copy.deepcopy(obj)
        self.patches: list[Object] = []

    async def patch(self, gvk: GVK, name: str, patch: Object, **_: Any) -> Object:
        self.patches.append(patch)
        status = dict(self.stored.get("status") or {})
        status.update({k: v for k, v in patch["status"].items() if v is not None})
        self.stored["status"] = status
        meta = self.stored["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        return copy.deepcopy(self.stored)


class NoEvents:
    async def event(self, *_: Any) -> None:
        return None


def status(*, driver_ready: bool) -> Any:
    operands = [
        OperandReadiness("pre-requisites", enabled=True),
        OperandReadiness("state-driver", enabled=True, ready=driver_ready),
    ]
    found = Findings(namespace="gpu-operator", generation=1, operands=operands, gpu_nodes=1)
    return policy_status(None, found, now=T0)


def policy(resource_version: int, stored_status: Any) -> Object:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {
            "name": "cluster-policy",
            "generation": 1,
            "resourceVersion": str(resource_version),
        },
        "status": stored_status.to_dict(defaults=True),
    }


async def test_a_status_back_to_what_the_lagging_cache_still_shows_is_written() -> None:
    # The policy is ready (resourceVersion 10) and the cache holds that copy.
    cached = policy(10, status(driver_ready=True))
    server = FakeServer(cached)
    writer = StatusWriter(server, NoEvents(), CLUSTER_POLICY, report_ready_changes=True)  # type: ignore[arg-type]

    # A new driver DaemonSet: not ready. Written; the cache has not seen it yet.
    await writer.write(cached, status(driver_ready=False))
    assert server.stored["status"]["state"] == "notReady"

    # It rolls out before the cache hears of our write: the next reconcile computes
    # `ready` again, the very status the stale cached copy shows. Compared with the cache
    # this was "unchanged" and the server kept saying notReady for good.
    await writer.write(cached, status(driver_ready=True))
    assert server.stored["status"]["state"] == "ready"
    assert len(server.patches) == 2


async def test_once_the_cache_has_caught_up_it_is_read_again() -> None:
    cached = policy(10, status(driver_ready=True))
    server = FakeServer(cached)
    writer = StatusWriter(server, NoEvents(), CLUSTER_POLICY, report_ready_changes=True)  # type: ignore[arg-type]
    await writer.write(cached, status(driver_ready=False))

    # The watch brings our write (11), then someone else's (12): the cache is newest.
    newer = copy.deepcopy(server.stored)
    newer["metadata"]["resourceVersion"] = "12"
    assert writer.latest(newer) is newer
    # And what our write returned is forgotten, even for an older copy seen later.
    assert writer.latest(cached) is cached
    # Nothing to write: the cache's copy already says notReady.
    await writer.write(newer, status(driver_ready=False))
    assert len(server.patches) == 1
