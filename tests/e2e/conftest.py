"""Fixtures for end-to-end tests: the full simulated GPU cluster, started once per session.

`sim_cluster` is a `gpusim.SimulatedCluster` (real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok nodes, simulated GPUs). Tests that change the
cluster put things back (their own namespace, their own added nodes), so tests can share it.
When a test that used it fails, each component's log tail joins the report and the full logs
are copied to `.test-logs/`.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpusim import ClusterConfig, SimulatedCluster, parse_os_list

REPO = Path(__file__).resolve().parents[2]

# Small on purpose: e2e time grows with nodes; the scale benchmark covers size.
E2E_CLUSTER = ClusterConfig(
    gpu_nodes=3,
    cpu_nodes=1,
    gpus_per_node=8,
    os=parse_os_list("ubuntu22.04,rhel9.4"),
    mig_reconfigure_seconds=0.5,
)
_failed_with_sim: list[str] = []


@pytest.fixture(scope="session")
def sim_cluster() -> Iterator[SimulatedCluster]:
    began = time.monotonic()
    sim = SimulatedCluster(E2E_CLUSTER).start()
    print(
        f"\nsimulated cluster: {len(sim.gpu_nodes)} GPU + {len(sim.cpu_nodes)} CPU nodes Ready "
        f"in {time.monotonic() - began:.1f}s",
        file=sys.stderr,
    )
    try:
        yield sim
    finally:
        if _failed_with_sim:
            logs = sim.workdir / "logs"
            target = REPO / ".test-logs" / f"sim-{time.strftime('%Y%m%d-%H%M%S')}"
            if logs.exists():
                shutil.copytree(logs, target, dirs_exist_ok=True)
                print(f"\nsimulated cluster logs kept in {target}", file=sys.stderr)
        sim.stop()


@pytest.fixture
async def sim_api(sim_cluster: SimulatedCluster) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ApiClient for the simulated cluster, as the admin user."""
    async with sim_cluster.api_client() as api:
        yield api


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and "sim_cluster" in getattr(item, "fixturenames", ()):
        _failed_with_sim.append(item.nodeid)
        sim = item.funcargs.get("sim_cluster") if hasattr(item, "funcargs") else None
        if isinstance(sim, SimulatedCluster):
            for name, tail in sim.log_tails(30).items():
                report.sections.append((f"{name} log (tail)", tail))
    return report  # type: ignore[return-value]
