"""A way back, end to end: a bad driver version (one the simulated nodes fail to validate:
the simulator's `failing-driver-versions` marker) halts within the failure budget; the admin
asks for a rollback (`nvidia.com/driver-rollback: failed`) and the failed nodes walk back to
the good version through the walk's own steps, with no GPU pod ever running under a
restarting driver, while the spec still asks for the bad version.

The package's 20 simulated GPU nodes and operator process with its validation timeout cut
to seconds, shared with `test_rollout_safety` (which runs after this module: the test
leaves the cluster with every node on the good version and nothing else of its own).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from components.api import ROLLBACK_ANNOTATION, UpgradeState
from gpusim import SimulatedCluster
from reconciler import GVK, Object, labels_of, name_of, uid_of
from tests.e2e.operator._harness import OperatorProcess
from tests.polling import eventually

from .conftest import POD, Watch, pod_ready
from .test_driver_upgrade import _workload
from .test_rollout_safety import (
    BAD,
    CLUSTER_POLICY,
    GOOD,
    IN_WALK,
    POLICY,
    _condition,
    _on_version,
    _rollout_done,
    _set_policy,
    _upgrade_status,
    operator,
    upgrade_cluster,
)

# The cluster and operator process (validation timeout cut to seconds) it shares.
__all__ = ["operator", "upgrade_cluster"]
S = UpgradeState
DEPLOYMENT = GVK("apps", "v1", "Deployment")


@pytest.fixture
async def as_found(upgrade_cluster: SimulatedCluster, watch: Watch) -> AsyncIterator[None]:
    """Afterwards, what the test added goes: its workload, the failing version, the
    rollback request (the rollout tests go on on this cluster)."""
    yield
    await upgrade_cluster.set_failing_driver_versions([])
    patch = {"metadata": {"annotations": {ROLLBACK_ANNOTATION: None}}}
    await watch.client.patch(CLUSTER_POLICY, POLICY, patch)
    await watch.client.delete(DEPLOYMENT, "train", namespace="work")

    def gone() -> bool:
        return not any(
            labels_of(p).get("app") == "train" for p in watch.cache.list(POD, namespace="work")
        )

    await eventually(gone, "the train pods gone", 120)


async def test_rollback_brings_the_failed_nodes_back_with_no_gpu_pod_under_a_restarting_driver(
    operator: OperatorProcess, upgrade_cluster: SimulatedCluster, watch: Watch, as_found: None
) -> None:
    budget, parallel = 2, 3
    upgrade = {"autoUpgrade": True, "maxParallelUpgrades": parallel, "maxUnavailable": "100%"}
    await _set_policy(watch, GOOD, upgrade)
    await _rollout_done(watch, GOOD)
    await _workload(watch, "train", 16)
    nodes = {name_of(n) for n in watch.gpu_nodes()}
    inv = watch.invariants(parallel, len(nodes), set())

    await upgrade_cluster.set_failing_driver_versions([BAD])
    await _set_policy(watch, BAD, {**upgrade, "failureBudget": budget})

    async def halted() -> Object | None:
        condition = _condition(await _upgrade_status(watch), "UpgradeHalted")
        settled = not any(s in IN_WALK for s in watch.states().values())
        return condition if condition and condition["status"] == "True" and settled else None

    await eventually(halted, "the bad version halted, no node left in the walk", 300)
    failed = {n for n, s in watch.states().items() if s == S.UPGRADE_FAILED}
    assert budget < len(failed) <= budget + parallel, watch.states()
    held = {p["spec"]["nodeName"]: uid_of(p) for p in watch.drivers()}
    held = {n: uid for n, uid in held.items() if n not in failed}

    patch = {"metadata": {"annotations": {ROLLBACK_ANNOTATION: "failed"}}}
    await watch.client.patch(CLUSTER_POLICY, POLICY, patch)

    async def back() -> Object | None:
        status = await _upgrade_status(watch)
        rolling = _condition(status, "RollingBack") or {}
        done = all(watch.states()[n] == S.UPGRADE_DONE for n in failed)
        on_good = failed <= _on_version(watch, GOOD)
        return status if done and on_good and rolling.get("reason") == "RolledBack" else None

    status = await eventually(back, f"the failed nodes back on {GOOD}", 300)
    watch.drop(inv)

    # No limit broken, and no GPU pod ran on a node whose driver was not running.
    assert not inv.violations, inv.violations[:5]
    assert failed <= inv.cordons_seen
    # The spec still asks for the bad version; the rollout stays halted, the rest untouched.
    spec = (await watch.client.get_live(CLUSTER_POLICY, POLICY))["spec"]["driver"]
    assert spec["version"] == BAD
    halt = _condition(status, "UpgradeHalted") or {}
    assert (halt.get("status"), halt.get("reason")) == ("True", "RollbackRequested"), halt
    drivers = {p["spec"]["nodeName"]: p for p in watch.drivers()}
    for node, uid in held.items():
        assert uid_of(drivers[node]) == uid and pod_ready(drivers[node]), node
    assert _on_version(watch, GOOD) == nodes  # every node on the good driver, Ready
