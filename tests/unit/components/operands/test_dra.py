"""The GPUCluster's DRA operands against the reference's `state-dra-driver` and
`state-dra-validation` manifests (Go templates, read here with every template directive
dropped): the same objects by kind and name, and in each the essentials a cluster or a
tool written for the reference relies on (labels, selectors, accounts, RBAC rules, device
class selectors, the ResourceSlice policy's expressions, containers, env, volumes)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from components.api import GPUCluster, dra_stack
from components.operands import DRA_OPERANDS, OPERANDS, ClusterView, DRADriver, DRAValidation
from components.operands._contract import GPUNode
from tests.tools import REPO

pytestmark = pytest.mark.unit

REFERENCE = REPO / "tests" / "fixtures" / "compat" / "reference-dra"
SAMPLE = REPO / "tests" / "fixtures" / "compat" / "nvidia-gpucluster-sample.yaml"
NS = "gpu-operator"
Obj = dict[str, Any]


def _expression(match: re.Match[str]) -> str:
    """A template expression's value with the defaults: `default "D"` is D, and
    `printf "%s/P" (... | default "D")` is D/P; anything else a placeholder."""
    text = match.group(0)
    default = re.search(r'default "([^"]*)"', text)
    if default is None:
        return "X"
    joined = re.search(r'printf "%s/([^"]*)"', text)
    return f"{default.group(1)}/{joined.group(1)}" if joined else default.group(1)


def _untemplated(text: str) -> str:
    """The template with its directives gone: lines that are only a directive dropped,
    `{{ .Namespace }}` made the namespace, an expression with a default its default, any
    other a placeholder (`X`)."""
    out = []
    for line in text.splitlines():
        if line.strip().startswith("{{"):
            continue
        line = line.replace("{{ .Namespace }}", NS)
        out.append(re.sub(r"\{\{.*?\}\}", _expression, line))
    return "\n".join(out)


def reference(state: str) -> dict[tuple[str, str], Obj]:
    objects: dict[tuple[str, str], Obj] = {}
    for path in sorted((REFERENCE / state).glob("*.yaml")):
        if "openshift" in path.name:
            continue  # SecurityContextConstraints: OpenShift only, not rendered here
        for doc in yaml.safe_load_all(_untemplated(path.read_text())):
            if doc:
                objects[(doc["kind"], doc["metadata"]["name"])] = doc
    return objects


def ours(state: str, spec: dict[str, Any] | None = None) -> dict[tuple[str, str], Obj]:
    document = yaml.safe_load(SAMPLE.read_text())
    for key, value in (spec or {}).items():
        document["spec"]["draDriver"][key] = value
    stack = dra_stack(GPUCluster.from_dict(document))
    view = ClusterView(
        namespace=NS,
        gpu_nodes=[GPUNode("n", {}, "ubuntu", "22.04", None, "containerd://1.7", False)],
        has_service_monitor_crd=False,
        owner=None,
    )
    (operand,) = [op for op in DRA_OPERANDS if op.name == state]
    rendered = operand.render(stack, view)
    assert rendered.conditions == []
    return {(o["kind"], o["metadata"]["name"]): o for o in rendered.objects}


EVERYTHING = {"featureGates": {"MPSSupport": True, "PassthroughSupport": True}}


@pytest.mark.parametrize("state", ["state-dra-driver", "state-dra-validation"])
def test_the_same_objects_as_the_reference(state: str) -> None:
    assert set(ours(state, EVERYTHING)) == set(reference(state))


@pytest.mark.parametrize("state", ["state-dra-driver", "state-dra-validation"])
def test_labels_rbac_and_bindings_as_the_reference(state: str) -> None:
    theirs, mine = reference(state), ours(state, EVERYTHING)
    for key, ref in theirs.items():
        obj = mine[key]
        assert (ref["metadata"].get("namespace") is None) == ("namespace" not in obj["metadata"])
        for label, value in (ref["metadata"].get("labels") or {}).items():
            if value != "X":
                assert obj["metadata"]["labels"][label] == value, (key, label)
        if key[0] in ("Role", "ClusterRole"):
            assert obj["rules"] == ref["rules"], key
        if key[0].endswith("Binding") and "roleRef" in ref:
            assert obj["roleRef"] == ref["roleRef"], key
            assert obj["subjects"] == ref["subjects"], key
        if key[0] == "DeviceClass":
            assert obj["spec"] == ref["spec"], key
        if key[0] == "ResourceClaimTemplate":
            request = ref["spec"]["spec"]["devices"]["requests"][0]
            mine_request = obj["spec"]["spec"]["devices"]["requests"][0]
            assert mine_request == {"name": request["name"], "exactly": request["exactly"]}


def _containers(pod: Obj) -> list[tuple[str, list[str], list[str]]]:
    """Each container: name, env names in order (not the user's, `X` in the template),
    mounts."""
    return [
        (
            c["name"],
            [e["name"] for e in c.get("env") or () if e["name"] != "X"],
            sorted(m["mountPath"] for m in c.get("volumeMounts") or ()),
        )
        for c in [*pod.get("initContainers", ()), *pod["containers"]]
    ]


@pytest.mark.parametrize(
    ("state", "kind", "name"),
    [
        ("state-dra-driver", "DaemonSet", "nvidia-dra-driver-kubelet-plugin"),
        ("state-dra-driver", "Deployment", "nvidia-dra-driver-controller"),
        ("state-dra-validation", "DaemonSet", "nvidia-dra-validator"),
    ],
)
def test_workloads_as_the_reference(state: str, kind: str, name: str) -> None:
    ref = reference(state)[(kind, name)]
    obj = ours(state, {"featureGates": {"PassthroughSupport": True}})[(kind, name)]
    assert obj["spec"]["selector"] == ref["spec"]["selector"]
    template, ref_template = obj["spec"]["template"], ref["spec"]["template"]
    for label, value in ref_template["metadata"]["labels"].items():
        assert template["metadata"]["labels"][label] == value
    pod, ref_pod = template["spec"], ref_template["spec"]
    assert pod["serviceAccountName"] == ref_pod["serviceAccountName"]
    assert pod.get("nodeSelector") == ref_pod.get("nodeSelector")
    assert pod["affinity"] == ref_pod["affinity"]
    assert pod.get("resourceClaims") == ref_pod.get("resourceClaims")
    assert pod["priorityClassName"] == "system-node-critical"
    # The plugin's token must name its node (the ResourceSlice policy reads that claim).
    assert pod.get("automountServiceAccountToken", True) is True
    assert _containers(pod) == _containers(ref_pod)
    if "volumes" in ref_pod:
        assert [v["name"] for v in pod["volumes"]] == [v["name"] for v in ref_pod["volumes"]]
    if kind == "DaemonSet":
        assert obj["spec"]["updateStrategy"] == ref["spec"]["updateStrategy"]


def test_the_resourceslice_policy_keeps_each_plugin_to_its_own_node() -> None:
    ref = reference("state-dra-driver")[
        ("ValidatingAdmissionPolicy", "resourceslices-policy-nvidia-dra-driver")
    ]
    obj = ours("state-dra-driver")[
        ("ValidatingAdmissionPolicy", "resourceslices-policy-nvidia-dra-driver")
    ]
    spec, ref_spec = obj["spec"], ref["spec"]
    assert spec["failurePolicy"] == ref_spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"] == ref_spec["matchConstraints"]
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == ref_spec["matchConditions"][0]["expression"].strip()
    assert f"system:serviceaccount:{NS}:nvidia-dra-driver-kubeletplugin" in condition["expression"]
    assert [(v["name"], v["expression"]) for v in spec["variables"]] == [
        (v["name"], v["expression"].strip()) for v in ref_spec["variables"]
    ]
    assert [v["expression"] for v in spec["validations"]] == [
        v["expression"] for v in ref_spec["validations"]
    ]
    binding = ours("state-dra-driver")[
        ("ValidatingAdmissionPolicyBinding", "resourceslices-policy-nvidia-dra-driver")
    ]
    assert binding["spec"] == {
        "policyName": "resourceslices-policy-nvidia-dra-driver",
        "validationActions": ["Deny"],
    }


def test_compute_domains_off_leaves_out_their_objects_and_container() -> None:
    mine = ours("state-dra-driver", {"computeDomains": {"enabled": False}})
    assert ("Deployment", "nvidia-dra-driver-controller") not in mine
    assert ("ClusterRole", "compute-domain-daemon") not in mine
    assert ("DeviceClass", "compute-domain-daemon.nvidia.com") not in mine
    assert ("DeviceClass", "gpu.nvidia.com") in mine
    pod = mine[("DaemonSet", "nvidia-dra-driver-kubelet-plugin")]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["gpus"]


def test_image_env_and_feature_gates_come_from_the_draDriver_section() -> None:
    mine = ours(
        "state-dra-driver",
        {
            "featureGates": {"MPSSupport": True, "NVMLDeviceHealthCheck": False},
            "gpus": {"kubeletPlugin": {"env": [{"name": "EXTRA", "value": "1"}]}},
        },
    )
    pod = mine[("DaemonSet", "nvidia-dra-driver-kubelet-plugin")]["spec"]["template"]["spec"]
    gpus = pod["containers"][0]
    assert gpus["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0"
    assert gpus["imagePullPolicy"] == "IfNotPresent"
    env = {e["name"]: e.get("value") for e in gpus["env"]}
    assert env["FEATURE_GATES"] == "MPSSupport=true,NVMLDeviceHealthCheck=false"
    assert env["EXTRA"] == "1"
    assert env["IMAGE_NAME"] == gpus["image"]
    assert ("Role", "nvidia-dra-driver-kubeletplugin-mps") in mine


def test_dcgm_and_its_exporter_run_on_the_dra_stacks_own_deploy_labels() -> None:
    stack = dra_stack(GPUCluster.from_dict(yaml.safe_load(SAMPLE.read_text())))
    view = ClusterView(namespace=NS, gpu_nodes=[], has_service_monitor_crd=False, owner=None)
    (exporter,) = [op for op in DRA_OPERANDS if op.name == "state-dcgm-exporter"]
    objects = exporter.render(stack, view).objects
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.deploy.dcgm-exporter-dra": "true"
    }
    # The ClusterPolicy's operands are untouched by the copies.
    (original,) = [op for op in OPERANDS if op.name == "state-dcgm-exporter"]
    assert original.deploy_label == "nvidia.com/gpu.deploy.dcgm-exporter"


def test_a_clusterpolicy_never_renders_the_dra_operands() -> None:
    from components.api import ClusterPolicy

    view = ClusterView(namespace=NS, gpu_nodes=[], has_service_monitor_crd=False, owner=None)
    for operand in (DRADriver(), DRAValidation()):
        assert operand.render(ClusterPolicy(), view).objects == []


@pytest.mark.parametrize(
    ("state", "section", "template"),
    [
        ("state-dcgm", "dcgm", "nvidia-dcgm-gpus"),
        ("state-dcgm-exporter", "dcgmExporter", "nvidia-dcgm-exporter-gpus"),
    ],
)
def test_dcgm_and_its_exporter_claim_their_nodes_gpus_instead_of_a_runtimeclass(
    state: str, section: str, template: str
) -> None:
    """The DRA stack makes no `nvidia` RuntimeClass and runs no toolkit: a pod naming the
    one or waiting for the other is refused or never starts (issue 50)."""
    document = yaml.safe_load(SAMPLE.read_text())
    document["spec"]["dcgm"]["enabled"] = True
    # The section's own resources keep the claim beside them.
    document["spec"][section]["resources"] = {"limits": {"memory": "1Gi"}}
    stack = dra_stack(GPUCluster.from_dict(document))
    view = ClusterView(namespace=NS, gpu_nodes=[], has_service_monitor_crd=False, owner=None)
    (operand,) = [op for op in DRA_OPERANDS if op.name == state]
    rendered = operand.render(stack, view)
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendered.objects}
    pod = objects[("DaemonSet", f"nvidia-{state.removeprefix('state-')}")]["spec"]["template"]
    spec = pod["spec"]
    assert "runtimeClassName" not in spec
    assert spec.get("initContainers", []) == []
    assert spec["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": template}]
    (main,) = spec["containers"]
    assert main["resources"] == {"limits": {"memory": "1Gi"}, "claims": [{"name": "gpus"}]}
    claim = objects[("ResourceClaimTemplate", template)]
    assert claim["metadata"]["namespace"] == NS
    (request,) = claim["spec"]["spec"]["devices"]["requests"]
    assert request == {
        "name": "gpus",
        "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "allocationMode": "All",
            "adminAccess": True,
        },
    }
