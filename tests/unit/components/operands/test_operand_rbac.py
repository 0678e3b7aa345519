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

from components.operands import OPERANDS
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
