"""The operator, run as its own process (as in its pod), on a simulated cluster of its own.

The cluster is per module, not the session one: the operator labels every GPU node and
rolls DaemonSets out on them, which the simulation tests must not see.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gpusim import SimulatedCluster, apply_crds, load_documents
from tests.e2e.operator._harness import (
    NAMESPACE,
    OPERATOR_CLUSTER,
    REPO,
    OperatorProcess,
    attach_logs,
)


@pytest.fixture(scope="module")
def operator_cluster() -> Iterator[SimulatedCluster]:
    # Our CRDs come with the cluster (before its controller manager), as on a cluster the
    # chart was installed on.
    crds = load_documents(sorted((REPO / "config" / "crd").glob("*.yaml")))
    with SimulatedCluster(OPERATOR_CLUSTER, crds=crds) as sim:
        served = asyncio.run(_served_crds(sim))
        wanted = {c["metadata"]["name"] for c in crds}
        assert wanted <= served, f"the cluster came without CRDs {sorted(wanted - served)}"
        yield sim


async def _served_crds(sim: SimulatedCluster) -> set[str]:
    from kubernetes_asyncio import client

    async with sim.api_client() as api:
        found = await client.ApiextensionsV1Api(api).list_custom_resource_definition()
    return {c.metadata.name for c in found.items}


@pytest.fixture(scope="module")
def operator(operator_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        operator_cluster.kubeconfig, operator_cluster.workdir / "logs" / "gpu-operator.log"
    )
    asyncio.run(_install(operator_cluster))
    process.start()
    try:
        yield process
    finally:
        process.stop()


async def _install(sim: SimulatedCluster) -> None:
    """Our CRDs (nothing to do where the cluster came with them) and the namespace."""
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        from kubernetes_asyncio import client

        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})


@pytest.fixture
async def kube(operator_cluster: SimulatedCluster) -> AsyncIterator[Any]:
    async with operator_cluster.api_client() as api:
        yield api


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        attach_logs(report, [item.funcargs.get("operator")], lines=60)
    return report  # type: ignore[return-value]
