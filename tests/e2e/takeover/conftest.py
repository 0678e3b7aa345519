"""A cluster NVIDIA's operator ran on, and ours taking it over: a simulated cluster of its
own, the reference's objects recreated by `gpusim.reference_install`, GPU workloads running
on its driver, then `gpu-operator run` started against the same ClusterPolicy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes_asyncio import client

from gpusim import ClusterConfig, SimulatedCluster, apply_crds, load_documents, parse_os_list
from tests.e2e.operator._harness import NAMESPACE, REPO, OperatorProcess, attach_logs
from tests.e2e.upgrade.conftest import Watch, watching

TAKEOVER_CLUSTER = ClusterConfig(
    gpu_nodes=4, cpu_nodes=1, gpus_per_node=2, os=parse_os_list("ubuntu22.04")
)


@pytest.fixture(scope="module")
def takeover_cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(TAKEOVER_CLUSTER) as sim:
        asyncio.run(_install(sim))
        yield sim


async def _install(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        core = client.CoreV1Api(api)
        for name in (NAMESPACE, "work"):
            await core.create_namespace({"metadata": {"name": name}})


@pytest.fixture(scope="module")
def operator(takeover_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    """Not started: the test starts it once the reference's cluster is in place."""
    process = OperatorProcess(
        takeover_cluster.kubeconfig, takeover_cluster.workdir / "logs" / "gpu-operator.log"
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def watch(takeover_cluster: SimulatedCluster) -> AsyncIterator[Watch]:
    async with watching(takeover_cluster) as w:
        yield w


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        args = item.funcargs
        attach_logs(
            report,
            [args.get("operator")],
            args.get("takeover_cluster"),
            keep_as="takeover",
            lines=120,
        )
    return report  # type: ignore[return-value]
