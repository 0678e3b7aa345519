"""`gpu-operator validate` on hostile input: one sentence and exit status 1, never a
traceback; and it reads what kubectl reads (lists, JSON, directories)."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
import yaml

from components.api._validate import MAX_OBJECT_BYTES, validate_text
from components.api._validate._files import MAX_FILE_BYTES
from components.cli import main

pytestmark = pytest.mark.unit

POLICY = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"
BAD_POLICY = {
    "apiVersion": "nvidia.com/v1",
    "kind": "ClusterPolicy",
    "metadata": {"name": "p"},
    "spec": {"mig": {"strategy": "weird"}},
}
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
        [f"{path}: the file is empty: no ClusterPolicy or NVIDIADriver found"],
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
    started = time.monotonic()
    code, out = validate(capsys, str(path))
    assert time.monotonic() - started < 10
    assert code == 1
    assert len(out) == 1 and out[0].endswith(
        "invalid YAML: aliases expand to more than 1,000,000 values"
    )


def test_a_recursive_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "loop.yaml", POLICY + "spec: &s {x: [*s]}\n")
    assert validate(capsys, str(path)) == (
        1,
        [f"{path}:4:7: invalid YAML: an alias refers to a value that contains it"],
    )


def test_an_unhashable_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "key.yaml", POLICY + "spec:\n  ? [a, b]\n  : 1\n")
    assert validate(capsys, str(path)) == (1, [f"{path}:5:5: invalid YAML: a key must be a string"])


def test_a_file_larger_than_anything_the_api_server_takes_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as sparse:
        sparse.truncate(MAX_FILE_BYTES + 1)
    assert validate(capsys, str(path)) == (
        1,
        [
            f"{path}: is 48.0 MiB, far more than the API server accepts in one request "
            "(3 MiB); not read"
        ],
    )


def test_a_resource_larger_than_the_api_server_stores_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = [{"name": f"VAR_{i}", "value": "x" * 100} for i in range(MAX_OBJECT_BYTES // 100)]
    document = {**BAD_POLICY, "spec": {"driver": {"env": env}}}
    path = write(tmp_path, "big.yaml", yaml.safe_dump(document))
    started = time.monotonic()
    code, lines = validate(capsys, str(path))
    assert time.monotonic() - started < 30  # the C loader: a few seconds on a slow machine
    assert code == 0
    assert lines[0] == f"{path}: ok"
    assert lines[1].startswith(f"{path}: warning: this resource is 2.0 MiB as JSON, more than")
    assert len(lines) == 2


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
