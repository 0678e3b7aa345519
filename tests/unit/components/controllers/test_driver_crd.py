"""NVIDIADriver resources as driver DaemonSets: the spec translated, the DaemonSet renamed
and narrowed to its pool."""

from __future__ import annotations

import pytest

from components.api import ClusterPolicy, NVIDIADriverSpec
from components.controllers._driver_crd import (
    daemonset_name,
    driver_section,
    for_nvidia_driver,
    policy_with_driver,
)
from components.operands import ClusterView, Driver, GPUNode

pytestmark = pytest.mark.unit

NODE = GPUNode(
    name="n1",
    labels={},
    os_id="ubuntu",
    os_version="22.04",
    kernel="5.15.0-1-generic",
    container_runtime="containerd://1.7.0",
    mig_capable=False,
)


def test_the_spec_becomes_a_driver_section() -> None:
    spec = NVIDIADriverSpec.from_dict(
        {
            "version": "580.1",
            "usePrecompiled": False,
            "repoConfig": {"name": "repos"},
            "env": [{"name": "A", "value": "1"}],
        }
    )
    section = driver_section(spec)
    assert section.version == "580.1"
    assert section.image == "nvcr.io/nvidia/driver"
    assert section.repo_config.config_map_name == "repos"
    assert [e.name for e in section.env] == ["A"]
    assert section.enabled and not section.use_nvidia_driver_crd


def test_daemonset_name() -> None:
    assert (
        daemonset_name("nvidia-driver-daemonset-ubuntu22.04", "pool-a", "gpu")
        == "nvidia-gpu-driver-pool-a-ubuntu22.04"
    )


def test_rendered_daemonset_is_renamed_and_narrowed() -> None:
    policy = ClusterPolicy.from_dict({"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    spec = NVIDIADriverSpec.from_dict(
        {"version": "580.1", "tolerations": [{"key": "pool", "operator": "Exists"}]}
    )
    view = ClusterView("gpu-operator", [NODE], False, None)
    rendered = Driver().render(policy_with_driver(policy, driver_section(spec)), view)
    (ds,) = [o for o in rendered.objects if o["kind"] == "DaemonSet"]
    out = for_nvidia_driver(
        ds,
        nvidia_driver="pool-a",
        spec=spec,
        selector={"pool": "a"},
    )
    name = "nvidia-gpu-driver-pool-a-ubuntu22.04"
    assert out["metadata"]["name"] == name
    assert out["spec"]["selector"]["matchLabels"]["app"] == name
    assert out["spec"]["template"]["metadata"]["labels"]["app"] == name
    pod = out["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["pool"] == "a"
    assert pod["nodeSelector"]["nvidia.com/gpu.deploy.driver"] == "true"
    assert {"key": "pool", "operator": "Exists"} in pod["tolerations"]
    assert pod["containers"][0]["image"] == "nvcr.io/nvidia/driver:580.1-ubuntu22.04"
    assert ds["metadata"]["name"] == "nvidia-driver-daemonset"  # not mutated


def render_pool(policy_spec: dict[str, object], driver: dict[str, object]) -> dict[str, object]:
    policy = ClusterPolicy.from_dict(
        {"spec": {**policy_spec, "driver": {"useNvidiaDriverCRD": True}}}
    )
    spec = NVIDIADriverSpec.from_dict({"version": "580.1", **driver})
    view = ClusterView("gpu-operator", [NODE], False, None)
    rendered = Driver().render(policy_with_driver(policy, driver_section(spec)), view)
    (ds,) = [o for o in rendered.objects if o["kind"] == "DaemonSet"]
    pod: dict[str, object] = for_nvidia_driver(
        ds, nvidia_driver="pool-a", spec=spec, selector={"pool": "a"}
    )["spec"]["template"]["spec"]
    return pod


def test_the_nvidia_driver_decides_its_pods_network_and_security_context() -> None:
    """The NVIDIADriver's own `hostNetwork` and `podSecurityContext`, as the reference's
    NVIDIADriver pods: the ClusterPolicy's `daemonsets.podSecurityContext` is not theirs."""
    policy_context = {"daemonsets": {"podSecurityContext": {"runAsUser": 1000}}}
    pod = render_pool(policy_context, {})
    assert "securityContext" not in pod and "hostNetwork" not in pod
    pod = render_pool(
        policy_context, {"hostNetwork": True, "podSecurityContext": {"fsGroup": 2000}}
    )
    assert pod["securityContext"] == {"fsGroup": 2000}
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
