"""Node churn: relabelling a share of the fleet, round after round, leaves the operator
caught up and quiet.

Other controllers and admins relabel nodes all day. Each update reaches the operator's
informers and, through its event filters, its work queues; what a user must never see is
a backlog that grows from one round to the next or a write storm in answer to labels the
operator does not own. `bench/churn.py` measures the same at fleet size (5,000 nodes); this
is the check that runs on every change.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from tests.e2e.operator._harness import OperatorProcess, create_policy, wait_ready
from tests.e2e.operator.conftest import _install
from tests.polling import eventually

NODES = 24
ROUNDS = 4
PER_ROUND = NODES // 4
CHURN_LABEL = "churn.example.com/round"
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    config = ClusterConfig(
        gpu_nodes=NODES, cpu_nodes=1, gpus_per_node=2, os=parse_os_list("ubuntu22.04")
    )
    with SimulatedCluster(config) as sim:
        yield sim


@pytest.fixture(scope="module")
def operator(operator_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    # Plain HTTP metrics: the test reads the queue depths and the operator's own requests.
    process = OperatorProcess(
        operator_cluster.kubeconfig,
        operator_cluster.workdir / "logs" / "gpu-operator.log",
        extra_args=["--metrics-secure=false"],
    )
    asyncio.run(_install(operator_cluster))
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def kube(operator_cluster: SimulatedCluster) -> AsyncIterator[Any]:
    async with operator_cluster.api_client() as api:
        yield api


def metrics(operator: OperatorProcess) -> tuple[float, int, int]:
    """(work queued or in flight over every queue, items ever added to a queue, writes the
    operator has sent)."""
    url = f"http://127.0.0.1:{operator.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    backlog, adds, writes = 0.0, 0, 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.name in ("workqueue_depth", "workqueue_unfinished_work_seconds"):
                backlog += sample.value
            elif family.name == "workqueue_adds" and sample.name.endswith("_total"):
                adds += int(sample.value)
            elif (
                family.name == "rest_client_requests"
                and sample.name.endswith("_total")
                and sample.labels.get("method") in WRITE_VERBS
            ):
                writes += int(sample.value)
    return backlog, adds, writes


async def test_relabelling_a_quarter_of_the_fleet_each_round_leaves_no_backlog_and_no_writes(
    operator: OperatorProcess, kube: Any
) -> None:
    await create_policy(kube, {})
    await wait_ready(kube)
    core = client.CoreV1Api(kube)
    gpu_nodes = sorted(
        n.metadata.name
        for n in (await core.list_node()).items
        if (n.metadata.labels or {}).get("nvidia.com/gpu.present") == "true"
    )
    assert len(gpu_nodes) == NODES

    def caught_up(after_adds: int) -> Any:
        async def check() -> tuple[float, int, int] | None:
            now = await asyncio.to_thread(metrics, operator)
            # The round's updates reached the queues (adds grew) and were all worked off.
            return now if now[1] > after_adds and now[0] == 0 else None

        return check

    last_writes = -1

    async def quiet() -> tuple[float, int, int] | None:
        # Ready is not yet quiet: a paced status write can come after the queues look
        # empty (it waits out its interval off the queue). Quiet: no write for 3 s.
        nonlocal last_writes
        now = await asyncio.to_thread(metrics, operator)
        settled = now[0] == 0 and now[2] == last_writes
        last_writes = now[2]
        return now if settled else None

    _, adds, writes_before = await eventually(
        quiet, "the operator quiet after ready", seconds=120, interval=3.0
    )
    for round_ in range(ROUNDS):
        batch = gpu_nodes[round_ * PER_ROUND : (round_ + 1) * PER_ROUND]
        await asyncio.gather(
            *(
                core.patch_node(name, {"metadata": {"labels": {CHURN_LABEL: str(round_)}}})
                for name in batch
            )
        )
        _, adds, _ = await eventually(
            caught_up(adds), f"round {round_ + 1} seen and worked off", seconds=60
        )
    _, _, writes_after = await asyncio.to_thread(metrics, operator)
    assert writes_after - writes_before == 0, "labels the operator does not own made it write"
    assert (await wait_ready(kube, seconds=10))["state"] == "ready"
    assert operator.alive()
