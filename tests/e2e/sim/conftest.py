"""Per-test isolation on the shared simulated cluster: a fresh namespace, removed afterwards
(with every pod in it gone, so the GPU node behaviour has taken its resources back), and
nodes a test adds, deleted afterwards."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from gpusim import SimulatedCluster
from tests.e2e.sim._kube import call, pods
from tests.polling import eventually

_counter = itertools.count()


@pytest.fixture
async def added_nodes(sim_cluster: SimulatedCluster) -> AsyncIterator[list[str]]:
    """Names a test appends here are deleted after it (after its namespace is gone)."""
    names: list[str] = []
    yield names
    for name in names:
        await sim_cluster.remove_node(name)


@pytest.fixture
async def namespace(
    sim_api: Any, request: pytest.FixtureRequest, added_nodes: list[str]
) -> AsyncIterator[str]:
    # Depends on added_nodes so that it is torn down first: pods go while their nodes exist.
    core = client.CoreV1Api(sim_api)
    short = re.sub(r"[^a-z0-9]+", "-", request.node.name.removeprefix("test_").lower())
    short = short[:40].strip("-")
    name = f"{short}-{next(_counter)}"
    await call(core.create_namespace, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        # Remove the workloads first (quicker than waiting for the namespace controller),
        # and wait until their pods are gone, so the GPU node behaviour has reacted.
        apps = client.AppsV1Api(sim_api)
        await call(apps.delete_collection_namespaced_daemon_set, name)
        await call(core.delete_collection_namespaced_pod, name, grace_period_seconds=0)

        async def empty() -> bool:
            return not await pods(sim_api, name)

        await eventually(empty, f"namespace {name} emptied")
        await call(core.delete_namespace, name)
