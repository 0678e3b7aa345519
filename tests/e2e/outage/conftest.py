"""The operator process on a simulated cluster of its own, behind a partition it alone
goes through: the control plane restarts under it, and the test decides when the operator
sees the API server again (once it is ready, not while it starts)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from tests.e2e.operator._harness import OperatorProcess, attach_logs
from tests.e2e.upgrade.conftest import _install

OUTAGE_CLUSTER = ClusterConfig(
    gpu_nodes=2, cpu_nodes=1, gpus_per_node=2, os=parse_os_list("ubuntu22.04")
)


@pytest.fixture(scope="module")
def outage_cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(OUTAGE_CLUSTER) as sim:
        asyncio.run(_install(sim))
        yield sim


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        sim = item.funcargs.get("outage_cluster")
        if isinstance(sim, SimulatedCluster):
            log = sim.workdir / "logs" / "gpu-operator.log"
            operator = OperatorProcess(sim.kubeconfig, log)
            attach_logs(report, [operator], sim, keep_as="outage")
    return report  # type: ignore[return-value]
