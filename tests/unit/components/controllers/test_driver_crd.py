"""NVIDIADriver resources as driver DaemonSets: the spec translated, the DaemonSet renamed
and narrowed to its pool."""

from __future__ import annotations

import pytest

from components.api import ClusterPolicy, NVIDIADriverSpec
from components.controllers._driver_crd import (
    RBAC_KINDS,
    account_name,
    accounts_for,
    daemonset_name,
    driver_section,
    for_nvidia_driver,
    os_tag,
    policy_with_driver,
    short_hash,
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


UID = "6f1c2d9e-0000-4000-8000-000000000001"


def test_short_hash_is_fnv32a_in_kubernetes_safe_alphabet() -> None:
    # FNV-1a test vectors: "" -> 2166136261, "a" -> 3826002220, digit by digit.
    assert short_hash("") == "65bb57b6b5"
    assert short_hash("a") == "7d6b446664"


def test_os_tag_as_the_reference_names_pools() -> None:
    assert os_tag("ubuntu", "22.04") == "ubuntu22.04"
    assert os_tag("rhel", "9.4") == "rhel9.4"
    assert os_tag("rhel", "10.0") == "rhel10"
    assert os_tag("rocky", "9.4") == "rocky9"


def test_daemonset_and_account_names() -> None:
    name = daemonset_name("gpu", "ubuntu22.04", UID)
    assert name == f"nvidia-gpu-driver-ubuntu22.04-{short_hash(UID)}"
    # One per NVIDIADriver (its UID) and, precompiled, per kernel.
    assert daemonset_name("gpu", "ubuntu22.04", "another-uid") != name
    kernel = "5.15.0-105-generic"
    assert daemonset_name("gpu", "ubuntu22.04", UID, kernel).endswith(
        "-" + short_hash(f"{UID}-{kernel}")
    )
    # A long prefix is cut, the hash kept, within a label value's 63 characters.
    long = daemonset_name("vgpu-host-manager", "ubuntu22.04" + "x" * 60, UID)
    assert len(long) == 63 and long.endswith("-" + short_hash(UID))
    assert account_name("pool-a", "gpu", "ubuntu22.04") == "nvidia-gpu-driver-pool-a-ubuntu22.04"
    assert account_name("pool-a", "vgpu-host-manager", "rhel9.4") == (
        "nvidia-vgpu-manager-pool-a-rhel9.4"
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
        uid=UID,
        spec=spec,
        selector={"pool": "a"},
    )
    name = f"nvidia-gpu-driver-ubuntu22.04-{short_hash(UID)}"
    assert out["metadata"]["name"] == name
    assert out["spec"]["selector"]["matchLabels"]["app"] == name
    assert out["spec"]["template"]["metadata"]["labels"]["app"] == name
    pod = out["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["pool"] == "a"
    assert pod["nodeSelector"]["nvidia.com/gpu.deploy.driver"] == "true"
    assert {"key": "pool", "operator": "Exists"} in pod["tolerations"]
    assert pod["containers"][0]["image"] == "nvcr.io/nvidia/driver:580.1-ubuntu22.04"
    assert pod["serviceAccountName"] == "nvidia-gpu-driver-pool-a-ubuntu22.04"
    assert ds["metadata"]["name"] == "nvidia-driver-daemonset"  # not mutated

    # Its own ServiceAccount and RBAC, the driver renderer's, renamed and bound to it.
    rbac = [o for o in rendered.objects if o["kind"] in RBAC_KINDS]
    accounts = accounts_for(rbac, [out, out])
    account = "nvidia-gpu-driver-pool-a-ubuntu22.04"
    assert sorted(o["kind"] for o in accounts) == sorted(o["kind"] for o in rbac)
    assert {o["metadata"]["name"] for o in accounts} == {account}
    for obj in accounts:
        assert obj["metadata"]["labels"]["nvidia.com/gpu-operator.nvidiadriver"] == "pool-a"
        if "roleRef" in obj:
            assert obj["roleRef"]["name"] == account
            assert [s["name"] for s in obj["subjects"]] == [account]
    assert {o["metadata"]["name"] for o in rbac} == {"nvidia-driver"}  # not mutated


def render_pool(policy_spec: dict[str, object], driver: dict[str, object]) -> dict[str, object]:
    policy = ClusterPolicy.from_dict(
        {"spec": {**policy_spec, "driver": {"useNvidiaDriverCRD": True}}}
    )
    spec = NVIDIADriverSpec.from_dict({"version": "580.1", **driver})
    view = ClusterView("gpu-operator", [NODE], False, None)
    rendered = Driver().render(policy_with_driver(policy, driver_section(spec)), view)
    (ds,) = [o for o in rendered.objects if o["kind"] == "DaemonSet"]
    pod: dict[str, object] = for_nvidia_driver(
        ds, nvidia_driver="pool-a", uid=UID, spec=spec, selector={"pool": "a"}
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


def test_the_cluster_policys_gpudirect_sidecars_are_not_an_nvidia_drivers() -> None:
    policy = ClusterPolicy.from_dict(
        {
            "spec": {
                "driver": {"useNvidiaDriverCRD": True},
                "gds": {"enabled": True},
                "gdrcopy": {"enabled": True},
            }
        }
    )
    view = ClusterView("gpu-operator", [NODE], False, None)
    section = driver_section(NVIDIADriverSpec.from_dict({"version": "580.1"}))
    rendered = Driver().render(policy_with_driver(policy, section), view)
    (ds,) = [o for o in rendered.objects if o["kind"] == "DaemonSet"]
    assert [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]] == [
        "nvidia-driver-ctr"
    ]
