"""GPUDirect sidecars and the CDI + NRI runtime mode on a real API server: every object the
renderers want for a policy with gds, gdrcopy, CDI and the NRI plugin on is applied as
rendered (server-side apply takes the new containers, mounts and annotations), and a second
reconcile writes nothing."""

from __future__ import annotations

import pytest

from reconciler import GVK
from tests.integration.components.controllers.conftest import Cluster, subset
from tests.integration.components.controllers.test_clusterpolicy import (
    expected_objects,
    key,
    mixed_cluster,
    ready,
)

pytestmark = pytest.mark.integration

RUNTIME_CLASS = GVK("node.k8s.io", "v1", "RuntimeClass")
SPEC = {
    "gds": {"enabled": True},
    "gdrcopy": {"enabled": True},
    "cdi": {"enabled": True, "nriPluginEnabled": True},
    "toolkit": {
        "env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file=/etc/containerd/config.toml"}]
    },
}


async def test_gpudirect_cdi_and_nri_apply_and_stay_put(cluster: Cluster) -> None:
    await mixed_cluster(cluster)
    policy = (await cluster.create_policy("gpudirect", SPEC))["metadata"]
    status = await ready(cluster, policy["name"])
    assert "Unsupported" not in str(status.get("conditions"))  # gds, gdrcopy: acted on
    await cluster.settle()

    expected = await expected_objects(cluster, policy["name"])
    live = {key(o): o for o in await cluster.owned()}
    assert sorted(live) == sorted(key(o) for o in expected)
    for obj in expected:
        problems = subset(obj, live[key(obj)])
        assert not problems, f"{key(obj)}: {problems[:5]}"

    daemonsets = await cluster.daemonsets()
    for name, tag in (("ubuntu22.04", "ubuntu22.04"), ("rhel9.4", "rhel9")):
        pod = daemonsets[f"nvidia-driver-daemonset-{name}"]["spec"]["template"]["spec"]
        images = {c["name"]: c["image"] for c in pod["containers"]}
        assert images["nvidia-fs-ctr"].endswith(f"nvidia-fs:2.29.4-{tag}")
        assert images["nvidia-gdrcopy-ctr"].endswith(f"gdrdrv:v2.6-{tag}")
    plugin = daemonsets["nvidia-device-plugin-daemonset"]["spec"]["template"]
    assert plugin["metadata"]["annotations"][
        "nvidia.cdi.k8s.io/container.nvidia-device-plugin"
    ] == ("management.nvidia.com/gpu=all")
    assert "runtimeClassName" not in plugin["spec"]
    for name in ("nvidia", "nvidia-cdi", "nvidia-legacy"):
        runtime_class = await cluster.get(RUNTIME_CLASS, name)
        assert runtime_class is not None and runtime_class["handler"] == name

    await cluster.assert_second_reconcile_writes_nothing()
