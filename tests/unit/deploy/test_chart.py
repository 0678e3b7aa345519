"""The Helm chart, rendered by the real helm: it lints strictly, takes NVIDIA's chart's
values file as it is, maps those values onto the ClusterPolicy, refuses what it cannot honour
by name, and stays in step with config/ and the API models. Helm 3 (`helm3`, still what many
clusters are managed with) lints it, renders the same manifests as Helm 4 and refuses the
same values."""

from __future__ import annotations

import filecmp
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.api import ClusterPolicy, unsupported_fields
from components.offline import validate_document
from tests.reference_chart import policy_images, reference_chart_images
from tests.tools import CHART, REPO, run
from tests.unit.components.api.cases import COMPAT

REFERENCE_VALUES = COMPAT / "reference-helm-values.yaml"
HELMS = ["helm", "helm3"]


def render(*args: str | Path) -> list[dict[str, Any]]:
    out = run("helm", "template", "gpu", CHART, "--namespace", "gpu-operator", *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(documents: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def refused(*args: str, helm: str = "helm") -> str:
    done = run(helm, "template", "gpu", CHART, *args, check=False)
    assert done.returncode != 0, f"{helm} template accepted it"
    return done.stderr


@pytest.mark.parametrize("helm", HELMS)
def test_lint_strict_passes(helm: str) -> None:
    run(helm, "lint", "--strict", CHART)
    run(helm, "lint", "--strict", CHART, "--values", REFERENCE_VALUES)


@pytest.mark.parametrize(
    "values", [(), ("--values", str(REFERENCE_VALUES))], ids=["defaults", "reference"]
)
def test_helm3_renders_what_helm4_renders(values: tuple[str, ...]) -> None:
    def rendered(helm: str) -> list[dict[str, Any]]:
        out = run(helm, "template", "gpu", CHART, "--namespace", "gpu-operator", *values).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    helm3 = rendered("helm3")
    assert {d["kind"] for d in helm3} >= {"Deployment", "ClusterPolicy", "Job"}
    assert helm3 == rendered("helm")


def test_default_values_install_the_operator_and_a_valid_policy() -> None:
    docs = render()
    kinds = sorted({d["kind"] for d in docs})
    assert kinds == [
        "ClusterPolicy",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Job",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    policy = one(docs, "ClusterPolicy")
    assert validate_document(policy) == []
    assert policy["spec"]["operator"]["metrics"]["serviceMonitor"]["enabled"] is False
    # The reference's ServiceMonitors select the operator's Service by `app`.
    assert one(docs, "Service")["metadata"]["labels"]["app"] == "gpu-operator"
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "gpu-operator:0.1.0"
    assert "--log-format=json" in container["args"]
    assert "--log-level=info" in container["args"]


def test_reference_values_file_is_taken_as_is_and_mapped() -> None:
    docs = render("--values", str(REFERENCE_VALUES))
    spec = one(docs, "ClusterPolicy")["spec"]
    reference = yaml.safe_load(REFERENCE_VALUES.read_text())
    assert spec["driver"]["version"] == reference["driver"]["version"]
    assert (
        spec["driver"]["upgradePolicy"]["podDeletion"]
        == (reference["driver"]["upgradePolicy"]["gpuPodDeletion"])
    )
    assert "gpuPodDeletion" not in spec["driver"]["upgradePolicy"]
    assert spec["driver"]["useNvidiaDriverCRD"] is False
    assert spec["mig"] == {"strategy": "single"}
    assert spec["dcgmExporter"]["serviceMonitor"]["interval"] == "15s"
    assert spec["operator"] == {
        "defaultRuntime": "containerd",
        "runtimeClass": "nvidia",
        "use_ocp_driver_toolkit": False,
        "metrics": {
            "serviceMonitor": {"enabled": False, "interval": "30s", "additionalLabels": {}}
        },
    }
    assert validate_document(one(docs, "ClusterPolicy")) == []


@pytest.mark.parametrize(
    "values", [(), ("--values", str(REFERENCE_VALUES))], ids=["defaults", "reference"]
)
def test_the_policy_brings_the_images_the_reference_chart_sets(values: tuple[str, ...]) -> None:
    """Ours resolves, from the policy our chart renders (its own defaults, or NVIDIA's values
    file), the images NVIDIA's 26.7 chart sets: the validator from its operator image."""
    rendered = one(render(*values), "ClusterPolicy")
    assert policy_images(ClusterPolicy.from_dict(rendered).spec) == reference_chart_images()
    # In the policy itself, so that NVIDIA's operator given it takes the same images.
    for section in ("validator", "nodeStatusExporter"):
        given = {k: rendered["spec"][section][k] for k in ("repository", "image", "version")}
        assert given == {
            "repository": "nvcr.io/nvidia",
            "image": "gpu-operator",
            "version": "v26.7.0",
        }


def test_full_values_file_reaches_every_place(tmp_path: Path) -> None:
    values = {
        "operator": {
            "repository": "registry.example/gpu",
            "version": "1.2.3",
            "logging": {"level": "debug", "format": "text"},
            "priorityClassName": "high",
            "nodeSelector": {"pool": "infra"},
            "metrics": {"serviceMonitor": {"enabled": True, "additionalLabels": {"team": "gpu"}}},
        },
        "driver": {
            "version": "580.1.2",
            "upgradePolicy": {"maxParallelUpgrades": 3, "gpuPodDeletion": {"force": True}},
            "nvidiaDriverCRD": {"enabled": True},
        },
        "devicePlugin": {"config": {"create": True, "name": "dp", "data": {"a": "b: c"}}},
        "migManager": {"config": {"create": True, "name": "mig", "default": ""}},
        "toolkit": {"enabled": False},
        "extraObjects": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}],
    }
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    docs = render("--values", str(path))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "registry.example/gpu/gpu-operator:1.2.3"
    assert {"--log-level=debug", "--log-format=text"} <= set(pod["containers"][0]["args"])
    assert pod["priorityClassName"] == "high"
    assert pod["nodeSelector"]["pool"] == "infra"
    assert not [d for d in docs if d["kind"] == "ServiceMonitor"]
    spec = one(docs, "ClusterPolicy")["spec"]
    # The operator creates the ServiceMonitor from the policy (one writer, as the reference).
    assert spec["operator"]["metrics"]["serviceMonitor"] == {
        "enabled": True,
        "interval": "30s",
        "additionalLabels": {"team": "gpu"},
    }
    assert spec["driver"]["version"] == "580.1.2"
    assert spec["driver"]["upgradePolicy"]["maxParallelUpgrades"] == 3
    assert spec["driver"]["upgradePolicy"]["podDeletion"]["force"] is True
    assert spec["driver"]["useNvidiaDriverCRD"] is True
    assert spec["devicePlugin"]["config"] == {"name": "dp", "default": ""}
    assert spec["migManager"]["config"] == {"name": "mig", "default": ""}
    assert spec["toolkit"]["enabled"] is False
    assert one(docs, "ConfigMap", "dp")["data"] == {"a": "b: c"}
    one(docs, "ConfigMap", "mig")
    one(docs, "ConfigMap", "x")
    assert validate_document(one(docs, "ClusterPolicy")) == []


def test_hooks_update_crds_before_upgrade_and_delete_the_policy_before_uninstall() -> None:
    docs = render()
    jobs = {j["metadata"]["annotations"]["helm.sh/hook"]: j for j in docs if j["kind"] == "Job"}
    assert set(jobs) == {"pre-upgrade", "pre-delete"}
    args = {
        hook: job["spec"]["template"]["spec"]["containers"][0]["args"] for hook, job in jobs.items()
    }
    assert args["pre-upgrade"] == ["apply-crds"]
    # Only this release's policy: `helm template gpu ... --namespace gpu-operator`.
    assert args["pre-delete"] == [
        "delete-policies",
        "--release=gpu",
        "--release-namespace=gpu-operator",
        "--timeout=240",
    ]
    no_upgrade = render("--set", "operator.upgradeCRD=false")
    assert [j["metadata"]["name"] for j in no_upgrade if j["kind"] == "Job"] == [
        "gpu-operator-pre-delete"
    ]


def test_host_network_kubelet_root_and_pod_security_context_reach_the_policy() -> None:
    spec = one(
        render(
            "--set",
            "toolkit.hostNetwork=true",
            "--set",
            "hostPaths.kubeletRootDir=/var/snap/microk8s/common/var/lib/kubelet",
            "--set",
            "daemonsets.podSecurityContext.runAsUser=0",
        ),
        "ClusterPolicy",
    )["spec"]
    assert spec["toolkit"]["hostNetwork"] is True
    assert spec["hostPaths"]["kubeletRootDir"] == "/var/snap/microk8s/common/var/lib/kubelet"
    assert spec["daemonsets"]["podSecurityContext"] == {"runAsUser": 0}
    assert (
        validate_document(
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "p"},
                "spec": spec,
            }
        )
        == []
    )


def test_sandbox_values_reach_the_policy_and_the_vm_operands_act_on_them() -> None:
    spec = one(
        render(
            "--set",
            "sandboxWorkloads.enabled=true",
            "--set",
            "sandboxWorkloads.defaultWorkload=vm-passthrough",
            "--set",
            "vgpuManager.enabled=true",
            "--set",
            "vgpuManager.repository=registry.example/nvidia",
            "--set",
            "vgpuDeviceManager.config.name=vgpu-devices",
            "--set",
            "sandboxDevicePlugin.env[0].name=P_GPU_ALIAS",
            "--set",
            "sandboxDevicePlugin.env[0].value=nvidia.com/gpu",
        ),
        "ClusterPolicy",
    )["spec"]
    assert spec["sandboxWorkloads"] == {
        "enabled": True,
        "defaultWorkload": "vm-passthrough",
        "mode": "kubevirt",
    }
    assert spec["vgpuManager"]["repository"] == "registry.example/nvidia"
    assert "kernelModuleConfig" not in spec["vgpuManager"]  # not acted on: not passed
    assert spec["vgpuDeviceManager"]["config"] == {"name": "vgpu-devices", "default": "default"}
    assert spec["ccManager"]["enabled"] is True  # NVIDIA's chart default
    document = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"}}
    assert validate_document({**document, "spec": spec}) == []
    assert unsupported_fields(ClusterPolicy.from_dict({**document, "spec": spec}).spec) == []


def test_gpudirect_sections_reach_the_policy() -> None:
    spec = one(
        render("--set", "gds.enabled=true", "--set", "gdrcopy.enabled=true"), "ClusterPolicy"
    )["spec"]
    assert spec["gds"]["enabled"] is True
    assert (spec["gds"]["image"], spec["gds"]["version"]) == ("nvidia-fs", "2.29.4")
    assert spec["gdrcopy"]["enabled"] is True
    assert (spec["gdrcopy"]["image"], spec["gdrcopy"]["version"]) == ("gdrdrv", "v2.6")
    document = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "spec": spec}
    assert validate_document({**document, "metadata": {"name": "p"}}) == []


def test_the_mig_change_pod_deletion_values_reach_the_policy() -> None:
    # Ours (issue 47): off by default, so a MIG change follows kubectl drain's rules.
    default = one(render(), "ClusterPolicy")["spec"]["migManager"]["podDeletion"]
    assert default == {"force": False, "deleteEmptyDir": False}
    allowed = ("--set", "migManager.podDeletion.force=true")
    policy = one(
        render(*allowed, "--set", "migManager.podDeletion.deleteEmptyDir=true"), "ClusterPolicy"
    )
    assert policy["spec"]["migManager"]["podDeletion"] == {"force": True, "deleteEmptyDir": True}
    assert validate_document(policy) == []
    message = refused("--set", "migManager.podDeletion.forse=true")
    assert "/migManager/podDeletion" in message and "forse" in message


def test_no_policy_when_the_admin_brings_their_own() -> None:
    assert not [
        d for d in render("--set", "clusterPolicy.deployCR=false") if d["kind"] == "ClusterPolicy"
    ]


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        (
            "vgpuManager.kernelModuleConfig.name=vgpu-modules",
            "vgpuManager.kernelModuleConfig.name is not supported",
        ),
        (
            "kataSandboxDevicePlugin.enabled=false",
            "kataSandboxDevicePlugin.enabled is not supported",
        ),
        ("operator.logging.timeEncoding=iso8601", "operator.logging.timeEncoding is not supported"),
    ],
)
@pytest.mark.parametrize("helm", HELMS)
def test_unsupported_value_is_refused_by_name(setting: str, named: str, helm: str) -> None:
    assert named in refused("--set", setting, helm=helm)


@pytest.mark.parametrize("helm", HELMS)
def test_unknown_key_is_refused_by_name(helm: str) -> None:
    message = refused("--set", "driver.verison=1", helm=helm)
    assert "/driver" in message and "verison" in message


def test_chart_copies_match_config_and_models() -> None:
    for crd in (REPO / "config" / "crd").glob("nvidia.com_*.yaml"):
        assert filecmp.cmp(crd, CHART / "crds" / crd.name, shallow=False), crd.name
    for role in ("cluster_role.yaml", "role.yaml", "admission_policies.yaml"):
        assert filecmp.cmp(
            REPO / "config" / "rbac" / role, CHART / "files" / "rbac" / role, shallow=False
        ), f"{role}: run hack/generate-crds.sh"
    documents = render()
    rbac = {d["kind"]: d for d in documents if d["metadata"]["name"] == "gpu-operator"}
    for kind, file in (("ClusterRole", "cluster_role.yaml"), ("Role", "role.yaml")):
        assert (
            rbac[kind]["rules"]
            == yaml.safe_load((REPO / "config" / "rbac" / file).read_text())["rules"]
        )
    # The admission policies that bound the operator's RBAC writes and the node agent's node
    # writes: the chart renders config/'s, spec for spec.
    policies = REPO / "config" / "rbac" / "admission_policies.yaml"
    for policy in yaml.safe_load_all(policies.read_text()):
        rendered = one(documents, policy["kind"], policy["metadata"]["name"])
        assert rendered["spec"] == policy["spec"]
        assert rendered["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_value_checks_are_current() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, REPO / "hack" / "chart_values.py", "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_upgrade_retry_backoff_reaches_the_policy() -> None:
    # Ours (issue 52): how long a failed node waits before the walk retries it.
    default = one(render(), "ClusterPolicy")["spec"]["driver"]["upgradePolicy"]["retryBackoff"]
    assert default == {"initialSeconds": 60, "maxSeconds": 3600}
    policy = one(
        render("--set", "driver.upgradePolicy.retryBackoff.maxSeconds=600"), "ClusterPolicy"
    )
    assert policy["spec"]["driver"]["upgradePolicy"]["retryBackoff"]["maxSeconds"] == 600
    assert validate_document(policy) == []
    message = refused("--set", "driver.upgradePolicy.retryBackoff.maxSecond=600")
    assert "retryBackoff" in message and "maxSecond" in message
