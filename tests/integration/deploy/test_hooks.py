"""The commands the chart's hook Jobs run, against a real API server: `apply-crds` installs
this version's CRDs, and `delete-policies` waits while a finalizer holds a policy (the
operator removing operands) and returns once it is gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.api import KINDS, crd
from components.hooks import apply_crds, delete_policies
from components.kinds import CLUSTER_POLICY
from reconciler import GVK, Cache, Client
from reconciler.envtest import ControlPlane
from reconciler.lowlevel import RESTMapper, Transport
from tests.polling import eventually

pytestmark = pytest.mark.integration

CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
MERGE = "application/merge-patch+json"


async def test_apply_crds_then_delete_policies(
    control_plane: ControlPlane, api_client: Any
) -> None:
    kubeconfig = str(control_plane.kubeconfig)
    await apply_crds(kubeconfig)
    transport = Transport(api_client)
    mapper = RESTMapper(transport)
    client = Client(transport, mapper, Cache(transport, mapper), field_manager="hooks-check")
    for kind in KINDS:
        live = await client.get_live(CRD, crd(kind)["metadata"]["name"])
        assert live["spec"]["versions"] == crd(kind)["spec"]["versions"]

    async def served() -> bool:
        try:
            await client.list_live(CLUSTER_POLICY)
        except Exception:
            return False
        return True

    await eventually(served, "ClusterPolicy served")
    await client.apply(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "hook-check", "finalizers": ["test.example/hold"]},
            "spec": {},
        }
    )
    # Held by the finalizer, as the operator holds it while it removes operands.
    assert await delete_policies(kubeconfig, 1.0) >= 1
    waiting = asyncio.create_task(delete_policies(kubeconfig, 60.0))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    resource = await client.resource(CLUSTER_POLICY)
    await client.request(
        "PATCH",
        resource.path("", "hook-check"),
        body={"metadata": {"finalizers": None}},
        content_type=MERGE,
    )
    assert await waiting == 0
