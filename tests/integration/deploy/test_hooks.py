"""The commands the chart's hook Jobs run, against a real API server: `apply-crds` installs
this version's CRDs, and `delete-policies` deletes the release's ClusterPolicy, and no
other, with foreground propagation.

This control plane has no kube-controller-manager, so no garbage collector ever lets a
policy deleted in the foreground go: here the hook finds it still present when its time is
up. That it returns once the operands are gone, and only then, is checked with a garbage
collector on a simulated cluster (tests/e2e/helm/test_helm_lifecycle.py)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from components.hooks import RELEASE_NAME, RELEASE_NAMESPACE, apply_crds, delete_policies
from components.kinds import CLUSTER_POLICY, GPU_CLUSTER
from components.offline import KINDS, crd
from reconciler import GVK, Cache, Client, Object, PatchType, name_of
from reconciler.envtest import ControlPlane
from reconciler.errors import NotFound
from reconciler.lowlevel import RESTMapper, Transport
from tests.polling import eventually

pytestmark = pytest.mark.integration

CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
RELEASE, RELEASE_NS = "hook-check", "hook-check-ns"
# name -> the Helm annotations it carries (none: applied by hand).
POLICIES: dict[str, dict[str, str]] = {
    "hook-check-release": {RELEASE_NAME: RELEASE, RELEASE_NAMESPACE: RELEASE_NS},
    "hook-check-same-name-other-namespace": {RELEASE_NAME: RELEASE, RELEASE_NAMESPACE: "other"},
    "hook-check-other-release": {RELEASE_NAME: "other", RELEASE_NAMESPACE: RELEASE_NS},
    "hook-check-by-hand": {},
}


@pytest.fixture
async def client(api_client: Any) -> AsyncIterator[Client]:
    transport = Transport(api_client)
    mapper = RESTMapper(transport)
    yield Client(transport, mapper, Cache(transport, mapper), field_manager="hooks-check")


async def test_apply_crds(control_plane: ControlPlane, client: Client) -> None:
    await apply_crds(str(control_plane.kubeconfig))
    for kind in KINDS:
        live = await client.get_live(CRD, crd(kind)["metadata"]["name"])
        assert live["spec"]["versions"] == crd(kind)["spec"]["versions"]


async def test_delete_policies_deletes_only_the_release_policy_in_the_foreground(
    control_plane: ControlPlane, client: Client
) -> None:
    kubeconfig = str(control_plane.kubeconfig)
    await apply_crds(kubeconfig)

    async def served() -> bool:
        try:
            await client.list_live(CLUSTER_POLICY)
        except Exception:
            return False
        return True

    await eventually(served, "ClusterPolicy served")
    for name, helm_annotations in POLICIES.items():
        await client.create(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": name, "annotations": helm_annotations},
                "spec": {},
            }
        )
    try:
        left = await delete_policies(kubeconfig, RELEASE, RELEASE_NS, 0.5)
        live = {name_of(p): p for p in await client.list_live(CLUSTER_POLICY)}
        untouched = {n for n in POLICIES if n in live and not deletion(live[n])}
        assert untouched == set(POLICIES) - {"hook-check-release"}, "another policy was deleted"
        # Held: deleting its dependents first, and no garbage collector here to do it.
        assert left == ["ClusterPolicy hook-check-release"]
        deleted = live["hook-check-release"]["metadata"]
        assert deleted.get("deletionTimestamp")
        assert deleted.get("finalizers") == ["foregroundDeletion"]

        # What the hook Job prints when its time is up.
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "components.cli",
            "delete-policies",
            f"--kubeconfig={kubeconfig}",
            f"--release={RELEASE}",
            f"--release-namespace={RELEASE_NS}",
            "--timeout=0",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 1
        assert (
            "gpu-operator: ClusterPolicy hook-check-release still present after 0s: the garbage "
            "collector (kube-controller-manager) removes it only after every object it owns"
        ) in err.decode()
    finally:
        await release_and_delete(client, list(POLICIES))


def deletion(policy: Object) -> bool:
    return bool(policy["metadata"].get("deletionTimestamp"))


async def test_delete_policies_deletes_the_release_gpucluster_too(
    control_plane: ControlPlane, client: Client
) -> None:
    """A GPUCluster's finalizer is the operator's: Helm deleting it with the release's other
    objects would remove the operator at the same moment and leave it stuck; the pre-delete
    hook deletes it while the operator still runs, and no other release's."""
    kubeconfig = str(control_plane.kubeconfig)
    await apply_crds(kubeconfig)

    async def served() -> bool:
        try:
            await client.list_live(GPU_CLUSTER)
        except Exception:
            return False
        return True

    await eventually(served, "GPUCluster served")
    # Only one GPUCluster may exist (named gpu-cluster): first another release's, then ours.
    name = "gpu-cluster"
    await client.create(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "GPUCluster",
            "metadata": {
                "name": name,
                "annotations": {RELEASE_NAME: "other", RELEASE_NAMESPACE: RELEASE_NS},
            },
            "spec": {"draDriver": {}},
        }
    )
    try:
        assert await delete_policies(kubeconfig, RELEASE, RELEASE_NS, 0.5) == []
        assert not deletion(await client.get_live(GPU_CLUSTER, name)), "another release's"
        await client.patch(
            GPU_CLUSTER,
            name,
            {"metadata": {"annotations": {RELEASE_NAME: RELEASE}}},
            patch_type=PatchType.MERGE,
        )
        left = await delete_policies(kubeconfig, RELEASE, RELEASE_NS, 0.5)
        # Held in the foreground: no garbage collector on this control plane.
        assert left == [f"GPUCluster {name}"]
        assert deletion(await client.get_live(GPU_CLUSTER, name))
    finally:
        await release_and_delete(client, [name], GPU_CLUSTER)


async def release_and_delete(client: Client, names: list[str], kind: GVK = CLUSTER_POLICY) -> None:
    """Clean up: no garbage collector will, on this shared control plane."""
    resource = await client.resource(kind)
    for name in names:
        try:
            await client.request(
                "PATCH",
                resource.path("", name),
                body={"metadata": {"finalizers": None}},
                content_type=PatchType.MERGE,
            )
        except NotFound:
            continue
        await client.delete(kind, name, missing_ok=True)
