"""The node agent operand: off by default; when on, a DaemonSet from the operator's image
on nodes labelled `nvidia.com/gpu.deploy.node-agent=true`, with what it needs to read the
GPUs (host PIDs, the host root read-only, privileged) and its metrics Service."""

from __future__ import annotations

from typing import Any

import pytest

from components.operands import NodeAgent
from components.operands._contract import Rendered

from .cases import CLUSTER, container, daemonsets, find, kinds_and_names, mounts, policy, view

pytestmark = pytest.mark.unit


def render(spec: dict[str, Any] | None = None, **kw: Any) -> Rendered:
    rendered: Rendered = NodeAgent().render(policy(spec), view(CLUSTER, **kw))
    return rendered


def test_off_unless_enabled() -> None:
    assert render().objects == []


def test_the_agent_daemonset_reads_the_gpus_from_the_operators_image() -> None:
    rendered = render({"nodeAgent": {"enabled": True, "intervalSeconds": 5}})
    (ds,) = daemonsets(rendered).values()
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.deploy.node-agent": "true"}
    assert spec["hostPID"] is True
    c = container(ds)
    assert c["image"] == "gpu-operator:0.1.0"
    assert c["command"][:2] == ["gpu-operator", "node-agent"]
    assert "--interval=5" in c["command"]
    assert "--driver-root=/run/nvidia/driver" in c["command"]
    assert c["securityContext"]["privileged"] is True
    assert mounts(c)["/host"] == "host-root"
    assert ("Service", "gpu-operator-node-agent") in kinds_and_names(rendered)


def test_user_args_add_to_the_agents_flags_and_the_image_can_be_moved() -> None:
    rendered = render(
        {
            "nodeAgent": {
                "enabled": True,
                "args": ["--log-level=debug"],
                "repository": "registry.example",
                "image": "gpu-operator",
                "version": "0.2.0",
            }
        }
    )
    c = container(next(iter(daemonsets(rendered).values())))
    assert c["image"] == "registry.example/gpu-operator:0.2.0"
    assert c["args"] == ["--log-level=debug"]
    assert "--host-root=/host" in c["command"]


def test_rbac_lets_it_write_only_its_node_conditions_and_read_pods() -> None:
    rendered = render({"nodeAgent": {"enabled": True}})
    role = find(rendered, "ClusterRole", "gpu-operator-node-agent")
    rules = {(tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]}
    assert rules == {
        (("nodes",), ("get", "list", "watch", "patch")),
        (("nodes/status",), ("patch",)),
        (("pods",), ("list",)),
    }


def test_the_agent_looks_for_the_driver_container_where_the_policy_installs_it() -> None:
    rendered = render(
        {"nodeAgent": {"enabled": True}, "hostPaths": {"driverInstallDir": "/opt/nvidia/driver"}}
    )
    c = container(next(iter(daemonsets(rendered).values())))
    assert "--driver-root=/opt/nvidia/driver" in c["command"]


def test_a_service_monitor_with_the_crd() -> None:
    rendered = render({"nodeAgent": {"enabled": True}}, service_monitors=True)
    assert ("ServiceMonitor", "gpu-operator-node-agent") in kinds_and_names(rendered)


def test_with_remediation_the_agent_may_write_the_hosts_reboot_sentinel() -> None:
    """The root is read-only: without /var/run mounted writable over it, the agent's
    reboot request on a real node fails and kured never reboots the node."""
    on = {"nodeAgent": {"enabled": True}, "remediation": {"enabled": True}}
    (ds,) = daemonsets(render(on)).values()
    c = container(ds)
    assert mounts(c)["/host/var/run"] == "host-run"
    run = next(m for m in c["volumeMounts"] if m["name"] == "host-run")
    assert not run.get("readOnly")
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["host-run"]["hostPath"] == {"path": "/var/run", "type": "Directory"}


@pytest.mark.parametrize(
    "remediation", [None, {"enabled": False}, {"enabled": True, "rebootOnFailure": False}]
)
def test_without_a_reboot_to_request_the_host_stays_read_only(
    remediation: dict[str, Any] | None,
) -> None:
    spec: dict[str, Any] = {"nodeAgent": {"enabled": True}}
    if remediation is not None:
        spec["remediation"] = remediation
    (ds,) = daemonsets(render(spec)).values()
    c = container(ds)
    assert all(m.get("readOnly") for m in c["volumeMounts"]), c["volumeMounts"]
