"""`gpu-operator validate` on hostile input: one sentence and exit status 1, never a
traceback; and it reads what kubectl reads (lists, JSON, directories)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from components.cli import main
from components.offline._validate import MAX_OBJECT_BYTES, load_documents, validate_text

pytestmark = pytest.mark.unit

POLICY = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"
BAD_POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "p"},
    "spec": {"mig": {"strategy": "weird"}},
}
#: What a resource too large for etcd is told.
ETCD_REFUSES = (
    "the 1.5 MiB etcd stores for one object (its --max-request-bytes default), so the API "
    "server cannot save it; make it smaller"
)
BAD_STRATEGY = (
    'spec.mig.strategy: unsupported value "weird": must be one of "none", "single", "mixed"'
)


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["validate", *args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out.splitlines()


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def test_a_binary_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "image.yaml", bytes(range(256)) * 4)
    assert validate(capsys, str(path)) == (1, [f"{path}: is a binary file, not YAML or JSON"])


def test_a_file_that_is_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path, "latin1.yaml", POLICY.encode() + "spec: {x: caf\xe9}\n".encode("latin-1")
    )
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}: is not UTF-8 text: byte 0xe9 on line 4 (YAML and JSON manifests must be UTF-8)"],
    )


def test_utf16_with_a_byte_order_mark_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "utf16.yaml", POLICY.encode("utf-16"))
    assert validate(capsys, str(path)) == (0, [f"{path}: ok"])


def test_a_control_character(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "ctrl.yaml", POLICY + "spec: {x: \x07}\n")
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}:4: invalid YAML: character #x0007 is not allowed in YAML"],
    )


def test_an_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "empty.yaml", "\n\n")
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}: the file is empty: no ClusterPolicy or NVIDIADriver or GPUCluster found"],
    )


@pytest.mark.parametrize("depth", [101, 400, 5000])
def test_yaml_nested_hundreds_of_levels_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    path = write(tmp_path, "deep.yaml", POLICY + "spec: " + "[" * depth + "]" * depth + "\n")
    code, lines = validate(capsys, str(path))
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{path}:4:")
    assert lines[0].endswith("invalid YAML: nested deeper than 100 levels")


def test_block_mappings_nested_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nested = "".join("  " * level + "k:\n" for level in range(1, 300))
    path = write(tmp_path, "deep.yaml", POLICY + "spec:\n" + nested)
    code, lines = validate(capsys, str(path))
    assert code == 1
    assert [line.split(": ", 1)[1] for line in lines] == [
        "invalid YAML: nested deeper than 100 levels"
    ]


def test_json_nested_thousands_of_levels_deep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "deep.json", '{"a":' * 5000 + "1" + "}" * 5000)
    code, lines = validate(capsys, str(path))
    assert code == 1
    assert len(lines) == 1 and lines[0].endswith("nested deeper than 100 levels")


def test_an_alias_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path = write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")
    code, out = validate(capsys, str(path))
    assert code == 1
    assert out == [
        f"{path}:6:35: document 1 expands through its aliases to more than 786,432 values: "
        f"its JSON would be over {ETCD_REFUSES}"
    ]


def test_a_recursive_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "loop.yaml", POLICY + "spec: &s {x: [*s]}\n")
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}:4:7: invalid YAML: an alias refers to a value that contains it"],
    )


def test_an_unhashable_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "key.yaml", POLICY + "spec:\n  ? [a, b]\n  : 1\n")
    assert validate(capsys, str(path)) == (1, [f"{path}:5:5: invalid YAML: a key must be a string"])


@pytest.mark.parametrize(
    ("size", "shown"), [(4 * 1024 * 1024 + 1, "4,194,305 bytes"), (48 * 1024 * 1024, "48.0 MiB")]
)
def test_a_file_larger_than_validate_reads_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], size: int, shown: str
) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as sparse:
        sparse.truncate(size)
    assert validate(capsys, str(path)) == (
        1,
        [
            f"{path}: is {shown}, more than the 4.0 MiB validate reads from one file (the API "
            "server takes at most 3 MiB a resource): split it; not read"
        ],
    )


def test_a_resource_larger_than_etcd_stores_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It used to be a warning and exit 0; the API server answers "etcdserver: request is
    too large", so it is a problem."""
    env = [{"name": f"VAR_{i}", "value": "x" * 100} for i in range(MAX_OBJECT_BYTES // 100)]
    document = {**BAD_POLICY, "spec": {"driver": {"env": env}}}
    path = write(tmp_path, "big.yaml", yaml.safe_dump(document))
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}: this resource is 2.0 MiB as JSON, more than {ETCD_REFUSES}"],
    )


def test_aliases_that_make_a_resource_larger_than_etcd_stores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1 MiB file whose one string is named ten times: 9.5 MiB once expanded (exit 0 and a
    warning before), measured without being expanded."""
    args = "".join("    - *s\n" for _ in range(9))
    text = f"{POLICY}spec:\n  driver:\n    args:\n    - &s {'x' * 1_000_000}\n{args}"
    path = write(tmp_path, "aliased.yaml", text)
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}: this resource is 9.5 MiB as JSON, more than {ETCD_REFUSES}"],
    )


def test_a_kind_list_is_read_item_by_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {**BAD_POLICY, "spec": {}}
    listed = {"apiVersion": "v1", "kind": "List", "items": [good, BAD_POLICY]}
    path = write(tmp_path, "list.yaml", yaml.safe_dump(listed))
    assert validate(capsys, str(path)) == (1, [f"{path} (item 2): {BAD_STRATEGY}"])


def test_a_top_level_yaml_list_is_read_item_by_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "list.yaml", yaml.safe_dump([BAD_POLICY]) + "---\n" + POLICY)
    assert validate(capsys, str(path)) == (1, [f"{path} (document 1, item 1): {BAD_STRATEGY}"])


def test_json_files_and_json_streams(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = json.dumps(BAD_POLICY, indent="\t")  # tabs: not YAML, but JSON
    path = write(tmp_path, "p.json", one + "\n" + one)
    assert validate(capsys, str(path)) == (
        1,
        [f"{path} (document 1): {BAD_STRATEGY}", f"{path} (document 2): {BAD_STRATEGY}"],
    )


def test_a_directory_stands_for_its_manifests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, "b.yml", POLICY)
    write(tmp_path, "a.json", json.dumps(BAD_POLICY))
    write(tmp_path, "notes.txt", "not a manifest")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "c.yaml", "not read: kubectl needs --recursive")
    assert validate(capsys, str(tmp_path)) == (
        1,
        [f"{tmp_path / 'a.json'}: {BAD_STRATEGY}", f"{tmp_path / 'b.yml'}: ok"],
    )


def test_a_directory_without_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(capsys, str(tmp_path)) == (
        1,
        [f"{tmp_path}: has no *.yaml, *.yml, *.json files"],
    )


def test_binary_standard_input(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\x00\x01\x02")))
    assert validate(capsys, "-") == (1, ["<stdin>: is a binary file, not YAML or JSON"])


@pytest.mark.parametrize(
    "text",
    ["{", "[", "---\n...\n---\n", "!!python/object:os.system {}", "a: !!binary '???'",
     "? a\n? a\n", "*undefined", "&a [*a, *a]", "'\\ud800'", "\ufeff" + POLICY, "- - - -"],
)  # fmt: skip
def test_odd_yaml_is_one_sentence(text: str) -> None:
    report = validate_text(text, "f.yaml")
    for line in report.lines():
        assert "\n" not in line


def test_an_integer_beyond_int64_is_one_error_not_a_traceback() -> None:
    text = (
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"
        "spec: {driver: {livenessProbe: {periodSeconds: 9223372036854775808}}}\n"
    )
    report = validate_text(text)
    messages = [str(p) for p in report.problems]
    assert any("periodSeconds" in m for m in messages), messages


INT64 = (
    "is outside int64 (-9223372036854775808 to 9223372036854775807), the range of the API "
    "server's JSON integers; write a smaller number"
)


@pytest.mark.parametrize("digits", [400, 5000])  # 5000: past Python's 4,300-digit limit
@pytest.mark.parametrize(
    "path",
    [
        "spec.driver.livenessProbe.periodSeconds",  # int32
        "spec.driver.upgradePolicy.maxUnavailable",  # int-or-string
        "spec.driver.resources.limits.cpu",  # a quantity
        "spec.driver.args[1]",
        "x",
        "status.state",
    ],
)
def test_an_integer_past_int64_anywhere_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], digits: int, path: str
) -> None:
    """A 5,000-digit integer was a ValueError traceback wherever it was; a 400-digit one
    passed where no schema types the field (int-or-string, quantities, status)."""
    value = f"[a, -{'9' * digits}]" if path.endswith("[1]") else "9" * digits
    for key in reversed(path.removesuffix("[1]").split(".")):
        value = f"{{{key}: {value}}}"
    text = POLICY + value[1:-1] + "\n"
    file = write(tmp_path, "long.yaml", text)
    says = f"a {digits:,}-digit integer {INT64}"
    assert validate(capsys, str(file)) == (1, [f"{file}: {path}: {says}"])


@pytest.mark.parametrize("value", [2**63, -(10**99)])
def test_an_integer_the_api_server_reads_as_a_float_is_reported_with_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: int
) -> None:
    """Up to float64's range the API server reads it (inexactly) and goes on to the schema,
    naming every field: so does validate, once for that field (not "must fit in int32")."""
    spec = (
        f"spec: {{mig: {{strategy: weird}}, driver: {{livenessProbe: {{periodSeconds: {value}}}}}}}"
    )
    file = write(tmp_path, "float.yaml", POLICY + spec + "\n")
    shown = str(value) if abs(value) < 10**80 else "a 100-digit integer"
    assert validate(capsys, str(file)) == (
        1,
        [
            f"{file}: spec.driver.livenessProbe.periodSeconds: {shown} {INT64}",
            f"{file}: {BAD_STRATEGY}",
        ],
    )


def test_an_integer_past_int64_in_metadata_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(json.dumps({**BAD_POLICY, "spec": {}}))
    text = json.dumps(document).replace('"p"}', '"p", "generation": ' + "7" * 5000 + "}")
    file = write(tmp_path, "long.json", text)
    assert validate(capsys, str(file)) == (
        1,
        [f"{file}: metadata.generation: a 5,000-digit integer {INT64}"],
    )


def test_a_number_json_cannot_carry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = write(tmp_path, "inf.yaml", POLICY.replace("{name: p}", "{name: p, generation: .inf}"))
    says = "inf is not a number JSON can carry; write a finite number"
    assert validate(capsys, str(file)) == (1, [f"{file}: metadata.generation: {says}"])


def test_a_long_integer_in_another_kind_of_resource_is_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: " + "1" * 5000
    other += "}\n"
    file = write(tmp_path, "two.yaml", other + "---\n" + POLICY)
    assert validate(capsys, str(file)) == (0, [f"{file}: ok"])


def test_a_status_is_a_warning_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API server drops a status on create (the status subresource), so the file is
    accepted; the pass for unsupported fields used to parse the status and raise."""
    file = write(tmp_path, "status.yaml", POLICY + "status: {state: disabled}\n")
    assert validate(capsys, str(file)) == (
        0,
        [
            f"{file}: ok",
            f"{file}: warning: status is ignored: the API server takes it only through the "
            "status subresource, so a create or apply drops it; leave it out of the file",
        ],
    )


KNOWN = (
    "ClusterPolicy (nvidia.com/v1) or NVIDIADriver (nvidia.com/v1alpha1) "
    "or GPUCluster (nvidia.com/v1alpha1)"
)
NOT_OURS = "is not a kind of nvidia.com;"


@pytest.mark.parametrize(
    ("kind", "line"),
    [
        ("Clusterpolicy", f'"Clusterpolicy" {NOT_OURS} write "ClusterPolicy"'),
        ("ClusterPolcy", f'"ClusterPolcy" {NOT_OURS} write "ClusterPolicy"'),
        ("NvidiaDriver", f'"NvidiaDriver" {NOT_OURS} write "NVIDIADriver"'),
        ("GPUPolicy", f'"GPUPolicy" {NOT_OURS} validate knows {KNOWN}'),
        (None, f"required field is missing: {KNOWN}"),
    ],
)
def test_a_later_document_that_means_to_be_ours_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str | None, line: str
) -> None:
    """A variant of our kinds, and any kind of our group, used to be passed over silently
    once the file had one of ours."""
    later = POLICY.replace("kind: ClusterPolicy\n", f"kind: {kind}\n" if kind else "")
    file = write(tmp_path, "two.yaml", POLICY + "---\n" + later)
    assert validate(capsys, str(file)) == (1, [f"{file} (document 2): kind: {line}"])


def test_other_projects_resources_are_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Namespace, a ConfigMap, and Kyverno's own ClusterPolicy (kyverno.io) are other
    resources: `kubectl apply` creates them without our rules."""
    others = [
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: gpu-operator}\n",
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: k}\nspec: {rules: []}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    ]  # fmt: skip
    file = write(tmp_path, "all.yaml", "---\n".join([*others, POLICY]))
    assert validate(capsys, str(file)) == (0, [f"{file}: ok"])


def test_merge_keys_are_read_as_kubectl_reads_them() -> None:
    """`<<` puts a mapping's keys under the ones written next to it (written ones win; in a
    list of mappings, the first), as goyaml does for kubectl."""
    text = "base: &b {x: 1, y: 2}\nother: {<<: *b, y: 3}\nboth: {<<: [{z: 1}, {z: 2, w: 0}]}\n"
    assert load_documents(text) == [
        {"base": {"x": 1, "y": 2}, "other": {"x": 1, "y": 3}, "both": {"z": 1, "w": 0}}
    ]
