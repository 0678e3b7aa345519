"""Pre-flight end to end: a mixed ubuntu22.04 + rhel9 cluster whose driver images live in a
real OCI registry (go-containerregistry's, started by gpusim on loopback).

A driver version is pushed for ubuntu22.04 only: the rhel9 nodes are never cordoned, the
policy's `PreflightFailed` condition and an Event name `...:<version>-rhel9` and the nodes
that need it, and the ubuntu nodes walk meanwhile; pushing the missing image (through the
registry's API) clears the condition and the walk goes on. A new install hears of a
missing image the same way, before any node is walked; a private registry is asked with
the policy's image pull secret.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from components.api import UpgradeState
from components.upgrade import STATE_LABEL
from gpusim import (
    ClusterConfig,
    SimulatedCluster,
    SimulatedRegistry,
    apply_crds,
    load_documents,
    parse_os_list,
)
from reconciler import GVK, Object, PatchType, labels_of, name_of
from tests.e2e.operator._harness import NAMESPACE, REPO, OperatorProcess
from tests.polling import eventually

from .conftest import Watch, pod_ready, watching

pytestmark = pytest.mark.e2e

S = UpgradeState
POLICY = "cluster-policy"
CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")
NODE = GVK("", "v1", "Node")
FIRST, SECOND, THIRD = "580.95.05", "590.48.01", "595.58.03"
REPOSITORY = "nvidia/driver"
MIXED = ClusterConfig(
    gpu_nodes=4, cpu_nodes=0, gpus_per_node=1, os=parse_os_list("ubuntu22.04,rhel9.4")
)
UBUNTU = {"gpu-node-0000", "gpu-node-0002"}
RHEL = {"gpu-node-0001", "gpu-node-0003"}


@pytest.fixture(scope="module")
def mixed_cluster() -> Iterator[SimulatedCluster]:
    with SimulatedCluster(MIXED, registry=True) as sim:
        asyncio.run(_install(sim))
        yield sim


async def _install(sim: SimulatedCluster) -> None:
    async with sim.api_client() as api:
        await apply_crds(api, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
        await client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})


@pytest.fixture(scope="module")
def operator(mixed_cluster: SimulatedCluster) -> Iterator[OperatorProcess]:
    process = OperatorProcess(
        mixed_cluster.kubeconfig, mixed_cluster.workdir / "logs" / "gpu-operator.log"
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def watch(mixed_cluster: SimulatedCluster) -> AsyncIterator[Watch]:
    async with watching(mixed_cluster) as w:
        yield w


def _registry(sim: SimulatedCluster) -> SimulatedRegistry:
    assert sim.registry is not None
    return sim.registry


def _driver(sim: SimulatedCluster, version: str) -> dict[str, Any]:
    return {
        "repository": f"{_registry(sim).address}/nvidia",
        "image": "driver",
        "version": version,
        "upgradePolicy": {
            "autoUpgrade": True,
            "maxParallelUpgrades": 0,
            "maxUnavailable": "100%",
            "preflight": {"mode": "Warn"},
        },
    }


async def _condition(watch: Watch) -> dict[str, Any] | None:
    policy = await watch.client.get_live(CLUSTER_POLICY, POLICY)
    for c in (policy.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PreflightFailed":
            return dict(c)
    return None


async def _events(sim: SimulatedCluster) -> list[str]:
    async with sim.api_client() as api:
        events = await client.CoreV1Api(api).list_event_for_all_namespaces()
    return [e.message or "" for e in events.items if e.reason == "PreflightFailed"]


def _cordoned(watch: Watch) -> set[str]:
    return {name_of(n) for n in watch.gpu_nodes() if (n.get("spec") or {}).get("unschedulable")}


def _on(watch: Watch, version: str) -> set[str]:
    return {
        str(p["spec"].get("nodeName"))
        for p in watch.drivers()
        if f":{version}-" in p["spec"]["containers"][0]["image"] and pod_ready(p)
    }


async def _walked(watch: Watch, nodes: set[str], version: str) -> None:
    async def done() -> bool:
        states = watch.states()
        return nodes <= _on(watch, version) and all(states[n] == S.UPGRADE_DONE for n in nodes)

    await eventually(done, f"{sorted(nodes)} on {version}, upgrade-done", 300)


class CordonLog:
    """Every node seen cordoned, from the node watch (not a poll that could miss one)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def on_add(self, obj: Object) -> None:
        self.check(obj)

    def on_update(self, old: Object, new: Object) -> None:
        self.check(new)

    def on_delete(self, obj: Object) -> None:
        pass

    def check(self, node: Object) -> None:
        if (node.get("spec") or {}).get("unschedulable"):
            self.seen.add(name_of(node))


async def test_a_new_install_hears_of_a_missing_image_before_any_node_is_walked(
    mixed_cluster: SimulatedCluster, operator: OperatorProcess, watch: Watch
) -> None:
    registry = _registry(mixed_cluster)
    registry.push_driver_images(FIRST, ["ubuntu22.04"], repository=REPOSITORY)
    await watch.client.create(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": POLICY},
            "spec": {"driver": _driver(mixed_cluster, FIRST)},
        }
    )
    missing = f"{registry.address}/{REPOSITORY}:{FIRST}-rhel9"

    async def reported() -> dict[str, Any] | None:
        c = await _condition(watch)
        return c if c and c["status"] == "True" else None

    condition = await eventually(reported, "PreflightFailed=True on the new install", 180)
    assert condition["reason"] == "ImageMissing"
    assert missing in condition["message"]
    assert all(n in condition["message"] for n in RHEL)
    assert not any(n in condition["message"] for n in UBUNTU)
    assert any(missing in m for m in await _events(mixed_cluster))
    assert _cordoned(watch) == set()

    registry.push_driver_images(FIRST, ["rhel9"], repository=REPOSITORY)

    async def cleared() -> bool:
        c = await _condition(watch)
        return bool(c and c["status"] == "False" and c["reason"] == "ImagesPresent")

    await eventually(cleared, "PreflightFailed=False once the rhel9 image is pushed", 120)
    await _walked(watch, UBUNTU | RHEL, FIRST)


async def test_a_version_missing_for_rhel9_walks_only_the_ubuntu_nodes_until_pushed(
    mixed_cluster: SimulatedCluster, operator: OperatorProcess, watch: Watch
) -> None:
    registry = _registry(mixed_cluster)
    registry.push_driver_images(SECOND, ["ubuntu22.04"], repository=REPOSITORY)
    cordons = CordonLog()
    watch.nodes.add_handler(cordons)
    ops = [{"op": "add", "path": "/spec/driver/version", "value": SECOND}]
    await watch.client.patch(CLUSTER_POLICY, POLICY, ops, patch_type=PatchType.JSON)

    # The ubuntu nodes walk to the new version; the rhel nodes wait, never cordoned.
    await _walked(watch, UBUNTU, SECOND)
    assert cordons.seen & RHEL == set(), f"rhel nodes cordoned: {sorted(cordons.seen & RHEL)}"
    missing = f"{registry.address}/{REPOSITORY}:{SECOND}-rhel9"

    async def blocked() -> dict[str, Any] | None:
        c = await _condition(watch)
        return c if c and c["status"] == "True" and missing in c["message"] else None

    condition = await eventually(blocked, f"PreflightFailed names {missing}", 120)
    assert condition["reason"] == "ImageMissing"
    assert all(n in condition["message"] for n in RHEL)
    states = watch.states()
    assert {n: states[n] for n in RHEL} == dict.fromkeys(RHEL, S.UPGRADE_REQUIRED.value)
    assert cordons.seen & RHEL == set(), f"rhel nodes cordoned: {sorted(cordons.seen & RHEL)}"
    assert _on(watch, FIRST) >= RHEL  # still on the old driver, untouched
    assert any(missing in m for m in await _events(mixed_cluster))

    registry.push_driver_images(SECOND, ["rhel9"], repository=REPOSITORY)
    await _walked(watch, RHEL, SECOND)

    async def cleared() -> bool:
        c = await _condition(watch)
        return bool(c and c["status"] == "False")

    await eventually(cleared, "PreflightFailed=False once the image is pushed", 120)
    assert {labels_of(n).get(STATE_LABEL) for n in watch.gpu_nodes()} == {S.UPGRADE_DONE.value}


async def test_a_private_registry_is_asked_with_the_policy_s_pull_secret(
    mixed_cluster: SimulatedCluster, operator: OperatorProcess, watch: Watch
) -> None:
    private = SimulatedRegistry(
        mixed_cluster.binaries.registry,
        mixed_cluster.workdir / "logs" / "private-registry.log",
        user="robot",
        password="s3cret",
    ).start()
    try:
        private.push_driver_images(THIRD, ["ubuntu22.04"], repository=REPOSITORY)
        config = {"auths": {private.address: {"username": "robot", "password": "s3cret"}}}
        await watch.client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "regcred", "namespace": NAMESPACE},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {
                    ".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()
                },
            }
        )
        ops = [
            {"op": "add", "path": "/spec/driver/repository", "value": f"{private.address}/nvidia"},
            {"op": "add", "path": "/spec/driver/imagePullSecrets", "value": ["regcred"]},
            {"op": "add", "path": "/spec/driver/version", "value": THIRD},
        ]
        await watch.client.patch(CLUSTER_POLICY, POLICY, ops, patch_type=PatchType.JSON)
        missing = f"{private.address}/{REPOSITORY}:{THIRD}-rhel9"

        # Without the secret's credentials the registry refuses us (a warning, no block):
        # a blocking ImageMissing means the 401 was answered with them.
        async def blocked() -> dict[str, Any] | None:
            c = await _condition(watch)
            return c if c and c["status"] == "True" and missing in c["message"] else None

        condition = await eventually(blocked, f"PreflightFailed names {missing}", 180)
        assert condition["reason"] == "ImageMissing"
        await _walked(watch, UBUNTU, THIRD)
        assert {watch.states()[n] for n in RHEL} == {S.UPGRADE_REQUIRED.value}

        private.push_driver_images(THIRD, ["rhel9"], repository=REPOSITORY)
        await _walked(watch, RHEL, THIRD)
    finally:
        private.stop()
