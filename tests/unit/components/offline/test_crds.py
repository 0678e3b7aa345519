"""The CRDs: generated from the models, committed, structural, and what the CLI prints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import main
from components.offline import CLUSTER_POLICY, KINDS, NVIDIA_DRIVER, crd, render_all
from components.offline._crd import cel_rules, render
from components.offline._validate._walk import SchemaChecker
from tests.unit.components.api.cases import REPO

pytestmark = pytest.mark.unit
CRD_DIR = REPO / "config" / "crd"


def schema_of(kind: Any) -> dict[str, Any]:
    schema: dict[str, Any] = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from walk(schema[key], f"{path}[{key}]")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_committed_crds_are_the_generated_ones(kind: Any) -> None:
    committed = CRD_DIR / kind.file_name
    assert committed.is_file(), f"{committed} is missing: run hack/generate-crds.sh"
    assert committed.read_text() == render(kind), (
        f"{committed} differs from the models: run hack/generate-crds.sh and commit the result"
    )


def test_no_stray_files_in_config_crd() -> None:
    crds = sorted(k.file_name for k in KINDS)
    assert sorted(p.name for p in CRD_DIR.iterdir()) == sorted([*crds, "kustomization.yml"])
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yml").read_text())
    assert sorted(kustomization["resources"]) == crds


def test_crds_command_prints_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds"]) == 0
    assert capsys.readouterr().out == render_all()
    documents = list(yaml.safe_load_all(render_all()))
    assert [d["metadata"]["name"] for d in documents] == [
        "clusterpolicies.nvidia.com",
        "nvidiadrivers.nvidia.com",
        "gpuclusters.nvidia.com",
    ]


def test_crds_command_writes_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "--output-dir", str(tmp_path), "--check"]) == 1
    assert main(["crds", "--output-dir", str(tmp_path)]) == 0
    assert main(["crds", "--output-dir", str(tmp_path), "--check"]) == 0
    (tmp_path / NVIDIA_DRIVER.file_name).write_text("stale\n")
    assert main(["crds", "--output-dir", str(tmp_path), "--check"]) == 1
    capsys.readouterr()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_names_scope_subresource_columns(kind: Any) -> None:
    document = crd(kind)
    spec = document["spec"]
    assert spec["group"] == "nvidia.com"
    assert spec["scope"] == "Cluster"
    assert spec["names"]["shortNames"]
    (version,) = spec["versions"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Status"] == ".status.state"
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_versions_and_short_names() -> None:
    assert crd(CLUSTER_POLICY)["spec"]["versions"][0]["name"] == "v1"
    assert crd(NVIDIA_DRIVER)["spec"]["versions"][0]["name"] == "v1alpha1"
    assert crd(NVIDIA_DRIVER)["spec"]["names"]["shortNames"] == ["nvd", "nvdriver", "nvdrivers"]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_schema_is_structural(kind: Any) -> None:
    for path, node in walk(schema_of(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "boolean"}, path
        if node.get("type") == "array":
            assert "items" in node, path
        assert not ("properties" in node and "additionalProperties" in node), path


def test_every_top_level_section_is_accepted() -> None:
    properties = schema_of(CLUSTER_POLICY)["properties"]["spec"]["properties"]
    design = [
        "operator",
        "daemonsets",
        "driver",
        "toolkit",
        "devicePlugin",
        "dcgm",
        "dcgmExporter",
        "gfd",
        "mig",
        "migManager",
        "nodeStatusExporter",
        "validator",
        "psa",
        "cdi",
        "hostPaths",
        "sandboxWorkloads",
        "vgpuManager",
        "vgpuDeviceManager",
        "vfioManager",
        "sandboxDevicePlugin",
        "kataSandboxDevicePlugin",
        "kataManager",
        "ccManager",
        "gds",
        "gdrcopy",
        "psp",
        "nodeAgent",  # ours: the node agent (not in the reference)
        "remediation",  # ours: GPU remediation (not in the reference)
    ]
    assert sorted(properties) == sorted(design)
    for name, section in properties.items():
        # Typed (the API server checks them), and `section:` with no value round-trips.
        assert "x-kubernetes-preserve-unknown-fields" not in section, name
        assert section["properties"], name
        assert section["nullable"] is True, name


def test_max_unavailable_is_int_or_percent() -> None:
    policy = schema_of(CLUSTER_POLICY)["properties"]["spec"]["properties"]["driver"]
    field = policy["properties"]["upgradePolicy"]["properties"]["maxUnavailable"]
    assert field["x-kubernetes-int-or-string"] is True
    assert field["default"] == "25%"
    assert "self.matches(" in field["x-kubernetes-validations"][0]["rule"]
    parallel = policy["properties"]["upgradePolicy"]["properties"]["maxParallelUpgrades"]
    assert (parallel["minimum"], parallel["default"]) == (0, 1)


def test_default_nvidiadriver_rule_points_at_node_selector() -> None:
    rules = schema_of(NVIDIA_DRIVER)["properties"]["spec"]["x-kubernetes-validations"]
    rule = next(r for r in rules if "nodeSelector" in r["rule"])
    assert rule["fieldPath"] == ".nodeSelector"
    assert rule["message"] == "default NVIDIADriver must not use nodeSelector"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_cel_rule_has_a_python_twin(kind: Any) -> None:
    known = cel_rules()
    for path, node in walk(schema_of(kind)):
        for entry in node.get("x-kubernetes-validations", []):
            assert entry["rule"] in known, f"{path}: {entry['rule']}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_defaults_satisfy_their_own_schema(kind: Any) -> None:
    checker = SchemaChecker()
    for path, node in walk(schema_of(kind)):
        if "default" in node:
            checker.check(node["default"], node, path)
    assert checker.problems == []


def test_enums_and_minimums_from_the_reference() -> None:
    spec = schema_of(CLUSTER_POLICY)["properties"]["spec"]["properties"]
    assert spec["mig"]["properties"]["strategy"]["enum"] == ["none", "single", "mixed"]
    # As the reference's: any string, no default (containerd is assumed when unset).
    assert spec["operator"]["properties"]["defaultRuntime"].keys() <= {"type", "description"}
    assert spec["driver"]["properties"]["kernelModuleType"]["default"] == "auto"
    probe = spec["driver"]["properties"]["startupProbe"]["properties"]
    assert probe["periodSeconds"]["minimum"] == 1
    assert "minimum" not in probe["initialDelaySeconds"]
    assert spec["cdi"]["properties"]["enabled"]["default"] is True
    driver = schema_of(NVIDIA_DRIVER)["properties"]["spec"]["properties"]
    assert driver["driverType"]["enum"] == ["gpu", "vgpu", "vgpu-host-manager"]
    assert driver["image"]["default"] == "nvcr.io/nvidia/driver"
    assert driver["upgradePolicy"]["properties"]["autoUpgrade"]["default"] is True


def test_crds_command_says_why_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["crds", "--output-dir", str(blocker)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-operator: cannot write the CRDs to {blocker}:")
    assert "Traceback" not in err
