"""Fields accepted but not acted on: one list, named by the policy's condition and by
`gpu-operator validate` alike, never silently ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.api import (
    ClusterPolicy,
    ClusterPolicySpec,
    NVIDIADriver,
    NVIDIADriverSpec,
    unsupported_fields,
)
from components.api._unsupported import CLUSTER_POLICY_RULES, NVIDIA_DRIVER_RULES
from components.cli import main
from components.offline import CLUSTER_POLICY, NVIDIA_DRIVER, Kind, crd, validate_document
from tests.unit.components.api.cases import REFERENCE_CRDS, REPO, driver, policy

pytestmark = pytest.mark.unit

HELM_RENDERED = REPO / "tests" / "fixtures" / "helm-rendered-clusterpolicy.yaml"


def spec_schema(kind: Kind) -> dict[str, Any]:
    schema: dict[str, Any] = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"])


def resolve(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = {"properties": {"spec": schema}}
    for part in path.split("."):
        node = (node or {}).get("properties", {}).get(part)
    return node


@pytest.mark.parametrize(
    ("kind", "rules"),
    [(CLUSTER_POLICY, CLUSTER_POLICY_RULES), (NVIDIA_DRIVER, NVIDIA_DRIVER_RULES)],
    ids=lambda v: getattr(v, "kind", ""),
)
def test_every_listed_field_is_one_the_crd_accepts(kind: Kind, rules: Any) -> None:
    schema = spec_schema(kind)
    for rule in rules:
        assert resolve(schema, rule.path) is not None, rule.path


def test_defaults_ask_for_nothing_unsupported() -> None:
    assert unsupported_fields(ClusterPolicySpec()) == []
    assert unsupported_fields(NVIDIADriverSpec()) == []
    off = {"gds": {"enabled": False}, "driver": {"hostNetwork": False}, "psp": {"enabled": False}}
    assert unsupported_fields(ClusterPolicy.from_dict(policy(off)).spec) == []


def test_each_field_set_is_named_with_its_value() -> None:
    spec = ClusterPolicy.from_dict(
        policy(
            {
                "psp": {"enabled": True},
                # acted on: not named
                "gds": {"enabled": True},
                "gdrcopy": {"enabled": True},
                "sandboxWorkloads": {"enabled": True},
                "vgpuManager": {"enabled": True},
                "kataManager": {"enabled": True},
                "ccManager": {"enabled": True},
                "toolkit": {"hostNetwork": True},
                "dcgmExporter": {"hostNetwork": True},
                "hostPaths": {"kubeletRootDir": "/data/kubelet"},
                "daemonsets": {"podSecurityContext": {"runAsUser": 0}},
                "operator": {"metrics": {"serviceMonitor": {"enabled": True}}},
            }
        )
    ).spec
    assert unsupported_fields(spec) == [
        "spec.psp.enabled=true",
    ]
    pool = NVIDIADriver.from_dict(
        driver(
            {
                "nodeSelector": {"pool": "a"},
                "gdrcopy": {"enabled": True},
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In"}]}
                        ]
                    }
                },
            }
        )
    ).spec
    assert unsupported_fields(pool) == ["spec.nodeAffinity", "spec.gdrcopy.enabled=true"]


def load_helm_rendered() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(HELM_RENDERED.read_text())
    return document


def test_the_helm_rendered_policy_fills_every_section_and_is_valid() -> None:
    document = load_helm_rendered()
    reference = yaml.safe_load(REFERENCE_CRDS["ClusterPolicy"].read_text())
    sections = reference["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    assert sorted(document["spec"]) == sorted(sections["spec"]["properties"])
    assert validate_document(document) == []


def test_validate_warns_about_the_helm_rendered_policy_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "-q", str(HELM_RENDERED)]) == 0
    source = str(HELM_RENDERED)
    assert capsys.readouterr().out.splitlines() == [
        f"{source}: warning: spec.dcgmExporter.podLabelAllowlistRegex is accepted but not acted on",
    ]
    # Errors still decide the exit status; the warnings of the other documents still show.
    both = tmp_path / "both.yaml"
    bad = policy({"mig": {"strategy": "weird"}}, name="bad")
    good = policy({"psp": {"enabled": True}}, name="good")
    both.write_text(yaml.safe_dump_all([bad, good]))
    assert main(["validate", str(both)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        f"{both} (document 2): warning: spec.psp.enabled=true is accepted but not acted on"
    )
    assert lines[0].startswith(f"{both} (document 1): spec.mig.strategy:")
