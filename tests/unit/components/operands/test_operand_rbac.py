"""Every role an operand renders is one the operator may create.

The API server refuses a Role or ClusterRole that grants more than its creator holds
(we do not hold `escalate`), so a rule missing from config/rbac is a policy stuck on a
403 in a real cluster; tests run as cluster-admin and would never see it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
import yaml

from components.api import GPUCluster, dra_stack
from components.operands import DRA_OPERANDS, OPERANDS
from tests.unit.components.api.cases import REPO
from tests.unit.components.operands.cases import CLUSTER, NAMESPACE, gpu_node, policy, view

pytestmark = pytest.mark.unit

DEPLOY = "nvidia.com/gpu.deploy."
#: Every operand switched on (the node agent, ours, too), on container, MIG, passthrough
#: and vGPU nodes.
EVERYTHING: Mapping[str, Any] = {
    "sandboxWorkloads": {"enabled": True},
    "vgpuManager": {"enabled": True, "repository": "registry.example/nvidia", "version": "595.58"},
    "vgpuDeviceManager": {"config": {"name": "vgpu-devices", "default": "A100-4C"}},
    "kataManager": {"enabled": True},
    "ccManager": {"enabled": True},
    "nodeStatusExporter": {"enabled": True},
    "nodeAgent": {"enabled": True},
    "migManager": {"enabled": True},
    "driver": {"rdma": {"enabled": True}},
    "dcgm": {"enabled": True},
    "devicePlugin": {"config": {"name": "plugin-config", "default": "mps"}},
}
NODES = [
    *CLUSTER,
    gpu_node("vm-1", labels={DEPLOY + "vfio-manager": "true"}),
    gpu_node("vm-2", labels={DEPLOY + "vgpu-manager": "true"}),
]
MPS = (
    "version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
)
MPS_CONFIG = {"plugin-config": {"mps": MPS}}


def _grants(rules: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for r in rules
        for group in r.get("apiGroups", [""])
        for resource in r["resources"]
        for verb in r["verbs"]
    }


def _operator_grants() -> dict[str, set[tuple[str, str, str]]]:
    held: dict[str, set[tuple[str, str, str]]] = {}
    for name in ("cluster_role.yaml", "role.yaml"):
        for doc in yaml.safe_load_all((REPO / "config" / "rbac" / name).read_text()):
            if doc and doc["metadata"]["name"] == "gpu-operator":
                held[doc["kind"]] = _grants(doc["rules"])
    return held


RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def every_operand_rbac(namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every ServiceAccount, role and binding the operands render with everything on."""
    cluster_view = replace(view(NODES, config_map_data=MPS_CONFIG), namespace=namespace)
    the_policy = policy(EVERYTHING)
    return [
        obj
        for operand in OPERANDS
        if operand.enabled(the_policy)
        for obj in operand.render(the_policy, cluster_view).objects
        if obj["kind"] in RBAC_KINDS
    ]


def every_dra_operand_rbac(namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every ServiceAccount, role and binding the GPUCluster's operands render, with the
    reference's sample and every optional part on (compute domains, MPS, DCGM)."""
    sample = yaml.safe_load(
        (REPO / "tests/fixtures/compat/nvidia-gpucluster-sample.yaml").read_text()
    )
    sample["spec"]["draDriver"]["featureGates"] = {"MPSSupport": True}
    sample["spec"]["dcgm"]["enabled"] = True
    stack = dra_stack(GPUCluster.from_dict(sample))
    cluster_view = replace(view(NODES), namespace=namespace)
    return [
        obj
        for operand in DRA_OPERANDS
        if operand.enabled(stack)
        for obj in operand.render(stack, cluster_view).objects
        if obj["kind"] in RBAC_KINDS
    ]


def every_operand_role(namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """Every Role and ClusterRole the operands render with everything switched on."""
    return [o for o in every_operand_rbac(namespace) if o["kind"] in ("ClusterRole", "Role")]


def test_every_operand_role_is_within_what_the_operator_holds() -> None:
    held = _operator_grants()
    missing: dict[str, set[tuple[str, str, str]]] = {}
    roles = every_operand_role()
    for obj in roles:
        may = held["ClusterRole"] | (held["Role"] if obj["kind"] == "Role" else set())
        extra = _grants(obj["rules"]) - may
        if extra:
            missing[f"{obj['kind']} {obj['metadata']['name']}"] = extra
    assert len(roles) >= 15
    assert missing == {}


def test_every_dra_operand_role_is_within_what_the_operator_holds() -> None:
    held = _operator_grants()
    missing: dict[str, set[tuple[str, str, str]]] = {}
    roles = [o for o in every_dra_operand_rbac() if o["kind"] in ("ClusterRole", "Role")]
    for obj in roles:
        may = held["ClusterRole"] | (held["Role"] if obj["kind"] == "Role" else set())
        extra = _grants(obj["rules"]) - may
        if extra:
            missing[f"{obj['kind']} {obj['metadata']['name']}"] = extra
    assert len(roles) >= 8
    assert missing == {}


def _held(account: str) -> set[tuple[str, str, str, str]]:
    """(where, group, resource, verb) the roles bound to `account` grant; where is
    "cluster" for a ClusterRole, "namespace" for a Role."""
    objects = every_operand_rbac()
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"] in RBAC_KINDS}
    out: set[tuple[str, str, str, str]] = set()
    for binding in (o for o in objects if o["kind"].endswith("Binding")):
        if not any(s["name"] == account for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        where = "cluster" if ref["kind"] == "ClusterRole" else "namespace"
        out |= {(where, *g) for g in _grants(roles[(ref["kind"], ref["name"])]["rules"])}
    return out


def test_the_toolkit_may_list_the_driver_daemonsets_its_driver_validation_looks_for() -> None:
    """The toolkit pod's driver-validation (NVIDIA's validator, COMPONENT=driver) lists the
    driver DaemonSets of OPERATOR_NAMESPACE when the host has no driver; refused, the init
    container fails and the toolkit never starts on a node with a driver container."""
    assert _held("nvidia-container-toolkit") == {("namespace", "apps", "daemonsets", "list")}


def test_the_driver_manager_holds_what_it_calls_and_no_more() -> None:
    """NVIDIA's k8s-driver-manager evicts GPU pods (kubectl's drain) and reads DaemonSets
    one by one; it neither deletes pods nor lists DaemonSets, as the reference grants."""
    held = _held("nvidia-driver")
    assert ("cluster", "", "pods/eviction", "create") in held
    assert ("cluster", "apps", "daemonsets", "get") in held
    assert ("cluster", "", "pods", "delete") not in held
    assert {g for g in held if g[2] == "daemonsets"} == {("cluster", "apps", "daemonsets", "get")}


def test_the_dcgm_exporter_may_read_a_metrics_configmap_of_its_namespace() -> None:
    """DCGM_EXPORTER_CONFIGMAP_DATA=<namespace>:<name> makes the exporter read its metrics
    list through the API; the reference lets it read ConfigMaps of its namespace."""
    held = _held("nvidia-dcgm-exporter")
    assert {("namespace", "", "configmaps", v) for v in ("get", "list")} <= held
    assert ("cluster", "", "configmaps", "get") not in held


def test_the_vgpu_device_manager_may_update_its_node() -> None:
    """NVIDIA's vGPU device manager writes nvidia.com/vgpu.config.state (and the paused
    operands' labels) with Nodes().Update: a patch right alone leaves it forbidden."""
    held = _held("nvidia-vgpu-device-manager")
    assert ("cluster", "", "nodes", "update") in held
    assert ("namespace", "", "pods", "delete") not in held


@pytest.mark.parametrize("account", ["nvidia-vfio-manager", "nvidia-vgpu-manager"])
def test_the_vm_driver_managers_hold_the_driver_managers_rights(account: str) -> None:
    """Their init container is NVIDIA's driver manager: it lists the pods on its node in
    every namespace and evicts (never deletes) GPU pods, as the reference grants."""
    held = _held(account)
    assert {
        ("cluster", "", "pods", "list"),
        ("cluster", "", "pods/eviction", "create"),
        ("cluster", "", "nodes", "patch"),
    } <= held
    assert not {g for g in held if g[3] == "delete" or g[0] == "namespace"}


def test_the_sandbox_validator_only_gets_its_node() -> None:
    assert _held("nvidia-sandbox-validator") == {("cluster", "", "nodes", "get")}
