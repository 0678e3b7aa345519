"""The MPS control daemon on a real API server: it appears when a node's device-plugin
config asks for MPS, applies cleanly, stays put on a second reconcile, and leaves when the
config no longer asks for it."""

from __future__ import annotations

from typing import Any

import pytest

from components.api import ClusterPolicy
from components.operands import ClusterView, GPUNode, MPSControlDaemon, read_config
from reconciler import owner_reference
from tests.integration.components.controllers.conftest import CLUSTER_POLICY, NODE, Cluster
from tests.polling import eventually

pytestmark = pytest.mark.integration

APP = "nvidia-device-plugin-mps-control-daemon"
CONFIG_LABEL = "nvidia.com/device-plugin.config"
MPS = (
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
)
PLAIN = "version: v1\n"


async def plugin_configs(cluster: Cluster, name: str, data: dict[str, str]) -> None:
    await cluster.client.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": cluster.namespace},
            "data": data,
        }
    )


async def test_mps_daemon_follows_the_device_plugin_config(cluster: Cluster) -> None:
    configs = cluster.name("plugin-configs")
    await plugin_configs(cluster, configs, {"mps-2": MPS, "plain": PLAIN})
    ubuntu = await cluster.add_node("gpu-u", labels={CONFIG_LABEL: "mps-2"})
    await cluster.add_node("gpu-r", os_id="rhel", os_version="9.4", labels={CONFIG_LABEL: "plain"})
    policy = (await cluster.create_policy("mps", {"devicePlugin": {"config": {"name": configs}}}))[
        "metadata"
    ]["name"]

    async def daemon() -> Any:
        return (await cluster.daemonsets()).get(APP)

    ds = await eventually(daemon, "the MPS control daemon DaemonSet")
    # What the server holds is what the renderer wants, field by field.
    live_policy = await cluster.get(CLUSTER_POLICY, policy)
    assert live_policy is not None
    nodes = [GPUNode.from_node(await cluster.client.get_live(NODE, n)) for n in cluster.nodes]
    view = ClusterView(
        namespace=cluster.namespace,
        gpu_nodes=sorted(nodes, key=lambda n: n.name),
        has_service_monitor_crd=False,
        owner=owner_reference(live_policy),
        config_documents={configs: {"mps-2": read_config(MPS), "plain": read_config(PLAIN)}},
    )
    rendered = MPSControlDaemon().render(ClusterPolicy.from_dict(live_policy), view)
    (wanted,) = [o for o in rendered.objects if o["kind"] == "DaemonSet"]
    live_template = ds["spec"]["template"]["spec"]
    assert live_template["affinity"] == wanted["spec"]["template"]["spec"]["affinity"]
    assert [c["name"] for c in live_template["containers"]] == [
        "mps-control-daemon-ctr",
        "config-manager",
    ]
    assert live_template["hostPID"] is True
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
        assert any(
            o["kind"] == kind and o["metadata"]["name"] == APP for o in await cluster.owned()
        ), kind
    await cluster.assert_second_reconcile_writes_nothing()

    # The node moves to the plain config: no node asks for MPS, the daemon goes.
    await cluster.label_node(ubuntu, {CONFIG_LABEL: "plain"})

    async def gone() -> bool:
        return APP not in await cluster.daemonsets()

    await eventually(gone, "the MPS control daemon to be removed")


async def test_mps_without_its_daemon_is_a_condition(cluster: Cluster) -> None:
    configs = cluster.name("plugin-configs")
    await plugin_configs(cluster, configs, {"mps-2": MPS})
    await cluster.add_node(
        "gpu-u",
        labels={CONFIG_LABEL: "mps-2", "nvidia.com/gpu.deploy.mps-control-daemon": "false"},
    )
    policy = (await cluster.create_policy("mps", {"devicePlugin": {"config": {"name": configs}}}))[
        "metadata"
    ]["name"]

    async def reported() -> Any:
        status = await cluster.status(policy)
        text = str(status.get("conditions"))
        return status if "MPSControlDaemonMissing" in text else None

    await eventually(reported, "the MPSControlDaemonMissing condition")
    assert APP not in await cluster.daemonsets()
    await cluster.assert_second_reconcile_writes_nothing()


async def test_an_edited_config_is_acted_on_at_once(
    reconciles_an_hour_apart: None, cluster: Cluster
) -> None:
    """A ConfigMap edit is an admin's change, not progress: with the policy's turns an hour
    apart, the config turning to MPS brings the daemon when the edit is seen."""
    configs = cluster.name("plugin-configs")
    await plugin_configs(cluster, configs, {"mps-2": PLAIN})
    await cluster.add_node("gpu-u", labels={CONFIG_LABEL: "mps-2"})
    await cluster.create_policy("mps", {"devicePlugin": {"config": {"name": configs}}})
    await eventually(lambda: _daemonset(cluster, "nvidia-device-plugin-daemonset"), "the plugin")
    await cluster.settle(delayed_counts=False)
    assert APP not in await cluster.daemonsets()

    await plugin_configs(cluster, configs, {"mps-2": MPS})
    await eventually(lambda: _daemonset(cluster, APP), "the MPS control daemon DaemonSet", 30)


async def _daemonset(cluster: Cluster, name: str) -> Any:
    return (await cluster.daemonsets()).get(name)


async def test_a_config_that_cannot_be_read_is_reported_and_the_rest_applied(
    cluster: Cluster,
) -> None:
    """A user's device-plugin config nested 5,000 deep (past Python's recursion limit, where
    every reconcile used to fail): the policy's status and a Warning Event name the ConfigMap
    and the key, while the device plugin and the daemon for the readable MPS config are
    applied. A reconcile with the ConfigMap unchanged reads none of it again."""
    configs = cluster.name("plugin-configs")
    deep = "version: v1\nsharing: " + "[" * 5000 + "]" * 5000 + "\n"
    await plugin_configs(cluster, configs, {"mps-2": MPS, "deep": deep})
    await cluster.add_node("gpu-u", labels={CONFIG_LABEL: "mps-2"})
    await cluster.add_node("gpu-d", labels={CONFIG_LABEL: "deep"})
    policy = (await cluster.create_policy("mps", {"devicePlugin": {"config": {"name": configs}}}))[
        "metadata"
    ]["name"]
    said = (
        f"device-plugin config deep in ConfigMap {cluster.namespace}/{configs} cannot be read: "
        "invalid YAML: nested deeper than 100 levels"
    )

    async def reported() -> Any:
        ready = await cluster.condition(policy)
        return ready if ready is not None and said in ready["message"] else None

    ready = await eventually(reported, "the DevicePluginConfigUnreadable condition")
    assert (ready["status"], ready["reason"]) == ("False", "DevicePluginConfigUnreadable")
    events = await cluster.events(policy)
    assert any(e["type"] == "Warning" and said in e["message"] for e in events), events
    daemonsets = await cluster.daemonsets()
    assert "nvidia-device-plugin-daemonset" in daemonsets
    (term, *_) = daemonsets[APP]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["mps-2"]  # not the unreadable one

    reads: list[str] = []
    documents = cluster.operator.cluster_policy.config_documents
    read = documents.read

    def counted(text: str) -> Any:
        reads.append(text)
        return read(text)

    documents.read = counted
    await cluster.assert_second_reconcile_writes_nothing()
    assert reads == []
    await plugin_configs(cluster, configs, {"mps-2": MPS, "deep": "version: v1\n"})
    await eventually(lambda: _cleared(cluster, policy), "the condition to clear")
    assert sorted(reads) == sorted([MPS, "version: v1\n"])


async def _cleared(cluster: Cluster, policy: str) -> bool:
    ready = await cluster.condition(policy)
    return ready is not None and ready["reason"] != "DevicePluginConfigUnreadable"
