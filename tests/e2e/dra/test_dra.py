"""NVIDIA's DRA stack on the simulated cluster: the kubelet plugin publishes each GPU node's
devices as a ResourceSlice under its own identity, and the real kube-scheduler allocates
ResourceClaims against them."""

from __future__ import annotations

from typing import Any

import pytest

from gpusim import SimulatedCluster
from tests.e2e.dra._api import gpu_slices

pytestmark = pytest.mark.e2e


async def test_every_gpu_node_publishes_its_slice(
    dra_cluster: SimulatedCluster, dra_api: Any
) -> None:
    slices = await gpu_slices(dra_api)
    assert set(slices) == set(dra_cluster.gpu_nodes)
    for node, found in slices.items():
        print(node, found)
