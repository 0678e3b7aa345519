"""The operand registry (`OPERANDS`) is the one place an operand is listed: the node
labeller's workload sets, the pod informer's choice of cached pods and the independence
contract follow it, and an operand added the documented way (docs/adding-an-operand.md)
is labelled, rendered and judged ready with no other edit."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from pydantic import Field

from components.api import (
    CLIENT_DEPLOY_LABEL,
    ClusterPolicySpec,
    ImageDefault,
    OperandSpec,
)
from components.controllers._labels import STATE_LABELS, WORKLOAD_LABELS
from components.kinds import PODS_CACHED_OF, PODS_NOT_CACHED_OF
from components.operands import (
    CONTAINER,
    DRA_OPERANDS,
    OPERANDS,
    VM_VGPU,
    Operand,
    daemonset_ready,
    deploy_labels_by_workload,
)
from components.operands._context import Ctx
from components.operands._contract import Rendered
from components.operands._declared import DeclaredOperand, MetricsService, Pod
from components.operands._names import deploy_label
from components.operands._pods import env_field
from components.operands._rbac import rule
from tests.tools import REPO

from .cases import daemonsets, find, gpu_node, policy, view

pytestmark = pytest.mark.unit


# --- a throwaway operand, added as docs/adding-an-operand.md says -------------------------


class WidgetSpec(OperandSpec):
    """1. Its spec model (in the ClusterPolicy, `spec.widget`)."""

    enabled: bool = False


class WidgetPolicySpec(ClusterPolicySpec):
    widget: WidgetSpec = Field(default_factory=WidgetSpec)


class Widget(DeclaredOperand):
    """2. Its module: only what is its own."""

    name = "state-widget"
    deploy_label = deploy_label("widget")
    workloads = frozenset({CONTAINER})
    app = "nvidia-widget"
    account = "nvidia-widget"
    image = ImageDefault("registry.example/nvidia", "widget", "v1.0.0", "WIDGET_IMAGE", "widget")
    cluster_rules = (rule([""], ["nodes"], ["get"]),)
    service = MetricsService(9500, "widget-metrics")

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = {"name": "widget", "command": ["widget"], "securityContext": {"privileged": True}}
        pod = Pod(main, volumes=[], env=[env_field("NODE_NAME", "spec.nodeName")])
        return [self.daemonset(ctx, image, pod)]


#: 3. One registry line.
WITH_WIDGET: tuple[Operand, ...] = (*OPERANDS, Widget())


def widget_policy(widget: dict[str, Any]) -> Any:
    base = policy()
    spec = WidgetPolicySpec.model_validate({**base.spec.to_dict(), "widget": widget})
    return base.model_copy(update={"spec": spec})


def test_an_added_operand_is_labelled_on_the_workloads_it_serves() -> None:
    labels = deploy_labels_by_workload(WITH_WIDGET)
    assert "nvidia.com/gpu.deploy.widget" in labels[CONTAINER]
    assert "nvidia.com/gpu.deploy.widget" not in labels[VM_VGPU]
    # Everything else the labeller writes today is unchanged by it.
    assert (
        labels[CONTAINER] - {"nvidia.com/gpu.deploy.widget"}
        == deploy_labels_by_workload()[CONTAINER]
    )


def test_an_added_operand_renders_its_skeleton_and_daemonset() -> None:
    widget = WITH_WIDGET[-1]
    assert widget.render(widget_policy({}), view()).objects == []  # off by default
    rendered = widget.render(
        widget_policy({"enabled": True, "version": "v1.1.0", "env": [{"name": "A", "value": "1"}]}),
        view(service_monitors=True),
    )
    kinds = [o["kind"] for o in rendered.objects]
    assert kinds == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "ServiceMonitor",
        "DaemonSet",
    ]
    ds = daemonsets(rendered)["nvidia-widget"]
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.deploy.widget": "true"}
    assert pod["serviceAccountName"] == "nvidia-widget"
    main = pod["containers"][0]
    assert main["image"] == "registry.example/nvidia/widget:v1.1.0"
    assert [e["name"] for e in main["env"]] == ["NODE_NAME", "A"]
    labels = ds["metadata"]["labels"]
    assert labels["nvidia.com/gpu-operator.component"] == "state-widget"
    assert find(rendered, "Service", "nvidia-widget")["spec"]["ports"][0]["port"] == 9500


def test_an_added_operand_is_judged_ready_by_its_daemonset() -> None:
    widget = WITH_WIDGET[-1]
    rendered = widget.render(widget_policy({"enabled": True}), view([gpu_node("gpu-1")]))
    ds = daemonsets(rendered)["nvidia-widget"]
    ds["metadata"].update(uid="w-uid", generation=1)
    ds["status"] = {
        "desiredNumberScheduled": 1,
        "numberUnavailable": 1,
        "updatedNumberScheduled": 1,
        "numberAvailable": 0,
        "observedGeneration": 1,
    }
    pod = {
        "metadata": {
            "name": "nvidia-widget-x",
            "labels": {"controller-revision-hash": "r1"},
            "ownerReferences": [{"kind": "DaemonSet", "uid": "w-uid"}],
        },
        "spec": {"nodeName": "gpu-1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    assert daemonset_ready(ds, [pod], []) == (False, ["gpu-1"])
    ds["status"].update(numberUnavailable=0, numberAvailable=1)
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert daemonset_ready(ds, [pod], [])[0] is True


# --- facts that follow the registry -----------------------------------------------------


def test_the_node_labeller_writes_each_workloads_labels_from_the_registry() -> None:
    assert {
        workload: labels | {CLIENT_DEPLOY_LABEL}
        for workload, labels in deploy_labels_by_workload().items()
    } == WORKLOAD_LABELS


def test_every_operands_deploy_label_is_one_the_labeller_writes() -> None:
    """A label no one writes leaves a DaemonSet selecting no node, yet reading as ready."""
    for operand in OPERANDS:
        if operand.deploy_label is not None:
            assert operand.deploy_label in STATE_LABELS, operand.name


def test_the_pod_informers_choice_names_only_registered_operands_with_pods() -> None:
    with_pods = {op.name for op in OPERANDS if op.deploy_label is not None}
    assert with_pods >= PODS_CACHED_OF
    assert with_pods >= PODS_NOT_CACHED_OF
    assert not PODS_CACHED_OF & PODS_NOT_CACHED_OF


def test_the_independence_contract_lists_every_operand_module() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    independent = next(c for c in contracts if c["type"] == "independence")
    operands = [*OPERANDS, *DRA_OPERANDS]
    modules = {".".join(type(op).__module__.split(".")[:3]) for op in operands} | {
        "components.operands.readiness"
    }
    assert set(independent["modules"]) == modules
