"""`gpu-operator validate`: the CRDs' verdicts offline, one line per problem."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from components.api import ClusterPolicy, NVIDIADriver
from components.cli import main
from components.offline import validate_document, validate_text
from tests.unit.components.api.cases import (
    COMPAT_FILES,
    INVALID,
    SAMPLE_FILES,
    VALID,
    Invalid,
    Valid,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
def test_invalid_documents_are_rejected_naming_the_field(case: Invalid) -> None:
    problems = validate_document(case.document)
    assert [p.path for p in problems] == [case.path], problems
    assert case.says in problems[0].message


@pytest.mark.parametrize("case", [c for c in INVALID if not c.strict_only], ids=lambda c: c.id)
def test_pydantic_rejects_what_the_crd_rejects(case: Invalid) -> None:
    model = ClusterPolicy if case.document["kind"] == "ClusterPolicy" else NVIDIADriver
    with pytest.raises(ValidationError):
        model.from_dict(case.document)


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
def test_valid_documents_pass(case: Valid) -> None:
    assert validate_document(case.document) == []


@pytest.mark.parametrize("path", COMPAT_FILES + SAMPLE_FILES, ids=lambda p: Path(p).name)
def test_samples_pass(path: Path) -> None:
    report = validate_text(path.read_text(), str(path))
    assert report.ok, list(report.lines())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["validate", *args])
    out = capsys.readouterr().out
    return code, out.splitlines()


def test_cli_prints_file_path_message_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(
        tmp_path,
        "policy.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\nspec:\n"
        "  mig:\n    strategy: weird\n  driver:\n    upgradePolicy:\n"
        "      maxParallelUpgrades: -1\n      maxUnavailable: abc\n",
    )
    code, lines = run(capsys, str(bad))
    assert code == 1
    assert lines == [
        f'{bad}: spec.mig.strategy: unsupported value "weird": must be one of "none", '
        '"single", "mixed"',
        f"{bad}: spec.driver.upgradePolicy.maxParallelUpgrades: must be greater than or "
        "equal to 0, not -1",
        f"{bad}: spec.driver.upgradePolicy.maxUnavailable: must be a non-negative integer or "
        "a percentage from 0% to 100%, like 25%",
    ]


def test_cli_passes_good_files(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(p) for p in COMPAT_FILES + SAMPLE_FILES]
    code, lines = run(capsys, *files)
    assert code == 0
    # The reference's samples (its GPUCluster's among them, which the GPUCluster controller
    # reconciles) ask for nothing we do not act on: no warning.
    assert lines == [f"{f}: ok" for f in files]
    code, lines = run(capsys, "-q", *files)
    assert code == 0
    assert lines == []


def test_yaml_syntax_errors_give_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = write(
        tmp_path, "broken.yaml", "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\n spec: {\n"
    )
    code, lines = run(capsys, str(broken))
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{broken}:3:")
    assert "invalid YAML" in lines[0]


def test_duplicate_keys_are_errors_with_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dup = write(
        tmp_path,
        "dup.yaml",
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n"
        "  mig: {strategy: single}\n  mig: {strategy: mixed}\n",
    )
    code, lines = run(capsys, str(dup))
    assert (code, lines) == (1, [f"{dup}:6:3: invalid YAML: duplicate key 'mig'"])


def test_multi_document_files_name_the_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}},
        {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "p"}},
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": "d"},
            "spec": {"default": True, "nodeSelector": {"a": "b"}},
        },
    ]
    path = write(tmp_path, "all.yaml", yaml.safe_dump_all(docs))
    code, lines = run(capsys, str(path))
    assert (code, lines) == (
        1,
        [f"{path} (document 3): spec.nodeSelector: default NVIDIADriver must not use nodeSelector"],
    )


@pytest.mark.parametrize(
    ("document", "line"),
    [
        (
            {
                "apiVersion": "nvidia.com/v1beta1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "p"},
            },
            'apiVersion: must be nvidia.com/v1 for a ClusterPolicy, not "nvidia.com/v1beta1"',
        ),
        (
            {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy"},
            "metadata: required field is missing (an object with a name)",
        ),
        (
            {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "A_b"}},
            'metadata.name: "A_b" is not a valid name',
        ),
        (
            {
                "apiVersion": "nvidia.com/v1",
                "kind": "ClusterPolicy",
                "metadata": {"name": "p"},
                "specs": {},
            },
            'specs: unknown field "specs"',
        ),
        ("just a string", "must be an object (a Kubernetes resource), not string"),
    ],
)
def test_document_level_problems(document: Any, line: str) -> None:
    (problem,) = validate_document(document)
    assert f"{problem.path}: {problem.message}".lstrip(": ").startswith(line)


def test_files_with_none_of_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, lines = run(capsys, str(path), str(tmp_path / "missing.yaml"))
    assert code == 1
    assert lines[0] == f"{path}: no ClusterPolicy or NVIDIADriver or GPUCluster found"
    assert lines[1].startswith(f"{tmp_path / 'missing.yaml'}: cannot read:")


def test_status_is_not_judged() -> None:
    document = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "p"},
        "status": {"state": "whatever"},
    }
    assert validate_document(document) == []


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(
        "sys.stdin",
        io.StringIO("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"),
    )
    assert run(capsys, "-") == (0, ["<stdin>: ok"])


@pytest.mark.parametrize(
    ("spec", "path", "says"),
    [
        (
            {"driver": {"livenessProbe": {"periodSeconds": 2**31}}},
            "spec.driver.livenessProbe.periodSeconds",
            "must fit in int32 (-2147483648 to 2147483647), not 2147483648",
        ),
        (
            {"dcgm": {"hostPort": -(2**31) - 1}},
            "spec.dcgm.hostPort",
            "must fit in int32 (-2147483648 to 2147483647), not -2147483649",
        ),
    ],
)
def test_integers_out_of_their_format_range(spec: dict[str, Any], path: str, says: str) -> None:
    """The API server refuses an int32 field's value past 2^31 (found by the property test
    against the real API server; `validate` used to accept it)."""
    document = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    assert [(p.path, p.message) for p in validate_document(document)] == [(path, says)]


def test_cel_rules_are_evaluated_from_the_crds_text() -> None:
    """Every non-transition CEL rule in the CRDs compiles and runs with the CEL library, and
    its verdict on the cases above is the one the Python twin on the models gives."""
    from components.offline._crd import cel_rules
    from components.offline._validate._cel import holds, is_transition

    values: list[Any] = [0, 5, -1, "25%", "101%", "abc", "", {}, {"default": "x"}]
    values += [{"default": "x", "name": "n"}, {"usePrecompiled": True, "version": "sha256:ab"}]
    values += [{"default": True, "nodeSelector": {"a": "b"}}]
    for text, rule in cel_rules().items():
        assert is_transition(text) == rule.transition, text
        if rule.transition:
            continue
        for value in values:
            try:
                expected = rule.check(value)
            except (AttributeError, TypeError):
                continue  # the twin only takes the value's own type
            assert holds(text, value) == expected, (text, value)


GPU_CLUSTER_DOC = (
    "apiVersion: nvidia.com/v1alpha1\nkind: GPUCluster\nmetadata:\n  name: gpu-cluster\n"
    "spec:\n  draDriver: {}\n"
)
POLICY_DOC = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: policy\nspec: {}\n"


def test_a_gpucluster_beside_a_clusterpolicy_is_refused_naming_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = write(tmp_path, "both.yaml", POLICY_DOC + "---\n" + GPU_CLUSTER_DOC)
    code, lines = run(capsys, str(both))
    assert code == 1
    assert lines == [
        f"{both} (document 2): kind: a GPUCluster and a ClusterPolicy are an invalid "
        "configuration (ClusterPolicy policy (document 1) is in the same file): both would "
        "manage the same GPU nodes; keep one of them"
    ]
    # Each alone passes: the pair is the problem, not either document.
    for name, text in (("policy.yaml", POLICY_DOC), ("cluster.yaml", GPU_CLUSTER_DOC)):
        assert run(capsys, str(write(tmp_path, name, text)))[0] == 0


def test_a_gpucluster_not_named_gpu_cluster_is_refused(tmp_path: Path) -> None:
    """There is one GPUCluster per cluster; the reference's CRD fixes its name."""
    renamed = yaml.safe_load(GPU_CLUSTER_DOC)
    renamed["metadata"]["name"] = "dra"
    problems = validate_document(renamed)
    assert [(p.path, p.message) for p in problems] == [
        ("metadata.name", "only one GPUCluster per cluster: its metadata.name must be gpu-cluster")
    ]


def test_a_gpucluster_without_its_dra_driver_section_is_refused() -> None:
    document = yaml.safe_load(GPU_CLUSTER_DOC)
    del document["spec"]["draDriver"]
    assert [(p.path, p.message) for p in validate_document(document)] == [
        ("spec.draDriver", "required field is missing")
    ]
