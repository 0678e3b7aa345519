"""The policy is not ready while a node still runs the reference operator's driver, even
when our driver DaemonSets (which stay off those nodes) are all ready; its `DriverTakeover`
condition names those nodes and says what moves them, and the admin is told (an Event, an
INFO line) each time that changes."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from components.api import ClusterPolicy
from components.controllers import Findings, OperandReadiness, policy_status
from components.controllers._status import TakeoverWait
from components.controllers.clusterpolicy._takeover import (
    DONE,
    ReferenceTakeover,
    with_reference_driver,
)


def policy(**driver: Any) -> ClusterPolicy:
    return ClusterPolicy.from_dict({"spec": {"driver": driver}})


def auto_upgrade(on: bool) -> ClusterPolicy:
    return policy(upgradePolicy={"autoUpgrade": on})


def test_nodes_on_the_reference_driver_keep_the_driver_and_the_policy_not_ready() -> None:
    ours = OperandReadiness("state-driver", enabled=True, ready=True, nodes_desired=0)
    wait = TakeoverWait.of({"gpu-2", "gpu-1"}, auto_upgrade(False))
    waiting = with_reference_driver(ours, wait)
    assert not waiting.ready and waiting.not_ready_nodes == ["gpu-1", "gpu-2"]
    status = policy_status(
        None,
        Findings(namespace="ns", generation=1, operands=[waiting], gpu_nodes=2, takeover=wait),
    )
    assert status.state == "notReady"
    assert "state-driver on gpu-1, gpu-2" in (status.condition("Ready").message or "")
    takeover = status.condition("DriverTakeover")
    assert takeover is not None and takeover.status == "True"
    assert takeover.reason == "AutoUpgradeOff"
    # Every node on ours: the readiness is ours alone, and the condition goes.
    assert TakeoverWait.of(set(), auto_upgrade(False)) is None
    assert with_reference_driver(ours, None) is ours
    done = policy_status(
        status.to_dict(), Findings(namespace="ns", generation=1, operands=[ours], gpu_nodes=2)
    )
    assert done.condition("DriverTakeover") is None


def test_with_auto_upgrade_off_the_condition_tells_the_admin_how_to_move_the_nodes() -> None:
    wait = TakeoverWait.of({"gpu-1", "gpu-2", "gpu-3"}, auto_upgrade(False))
    assert wait is not None and not wait.walks
    assert wait.message == (
        "3 nodes still run NVIDIA's operator's driver (gpu-1, gpu-2, gpu-3); driver auto "
        "upgrade is off: drain a node and delete its driver pod "
        "(app.kubernetes.io/component=nvidia-driver) to move it to ours, or set "
        "driver.upgradePolicy.autoUpgrade: true to walk them all within maxParallelUpgrades "
        "and maxUnavailable"
    )
    one = TakeoverWait.of({"gpu-1"}, auto_upgrade(False))
    assert one is not None and one.message.startswith("1 node still runs")
    # Many nodes: five named, the count says how many.
    many = TakeoverWait.of({f"gpu-{i:02}" for i in range(12)}, auto_upgrade(False))
    assert many is not None and "(gpu-00, gpu-01, gpu-02, gpu-03, gpu-04 and 7 more)" in (
        many.message
    )
    # The ClusterPolicy's auto upgrade would not move them: the hint is left out.
    crd = TakeoverWait.of({"gpu-1"}, policy(useNvidiaDriverCRD=True))
    assert crd is not None and "autoUpgrade" not in crd.message


def test_with_auto_upgrade_on_the_condition_says_the_walk_moves_them() -> None:
    wait = TakeoverWait.of({"gpu-1"}, auto_upgrade(True))
    assert wait is not None and wait.walks and wait.reason == "UpgradeWalk"
    assert "the driver upgrade walk moves them to ours" in wait.message
    assert "delete" not in wait.message


def test_the_admin_is_told_once_per_change(caplog: pytest.LogCaptureFixture) -> None:
    takeover = ReferenceTakeover(client=None, namespace="ns")  # type: ignore[arg-type]
    off = auto_upgrade(False)
    caplog.set_level(logging.INFO, logger="components.controllers.takeover")
    assert takeover.announce("cp", None) is None  # no takeover: nothing to say
    four = TakeoverWait.of({"a", "b", "c", "d"}, off)
    assert four is not None
    assert takeover.announce("cp", four) == four.message
    assert takeover.announce("cp", four) is None  # the same again
    # Waiting for the admin, each node moved is news.
    three = TakeoverWait.of({"b", "c", "d"}, off)
    assert three is not None and takeover.announce("cp", three) == three.message
    # Auto upgrade turned on: said once; the walk's progress is not (it reports each node).
    walking = TakeoverWait.of({"b", "c", "d"}, auto_upgrade(True))
    assert walking is not None and takeover.announce("cp", walking) == walking.message
    fewer = TakeoverWait.of({"d"}, auto_upgrade(True))
    assert takeover.announce("cp", fewer) is None
    assert takeover.announce("cp", None) == DONE
    assert takeover.announce("cp", None) is None
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"ClusterPolicy cp: {four.message}",
        f"ClusterPolicy cp: {three.message}",
        f"ClusterPolicy cp: {walking.message}",
        f"ClusterPolicy cp: {DONE}",
    ]
