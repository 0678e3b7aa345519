"""`gpu-operator validate` on input built to take the machine, run as its own process with
its address space held to 400 MiB (twice the 200 MiB it may use): each is one sentence and
exit status 1, never a traceback, a MemoryError, or a wait on a pipe with no writer (the
60 s timeout only stops a hang; nothing here is timed)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

pytestmark = pytest.mark.unit

ADDRESS_SPACE = 400 * 1024 * 1024
POLICY = "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n"
TOO_LARGE = (
    "the 4.0 MiB validate reads from one file (the API server takes at most 3 MiB a "
    "resource): split it; not read"
)
NOT_A_FILE = (
    "not a regular file: pass its content on standard input (`gpu-operator validate -`) "
    "instead; not read"
)
TOO_MANY = (
    "document 1 has more than 786,432 values: its JSON would be over the 1.5 MiB etcd stores "
    "for one object (its --max-request-bytes default), so the API server cannot save it; "
    "make it smaller"
)


def _hold_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def validate(*args: str, stdin: IO[bytes] | None = None) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "components.cli", "validate", *args],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_hold_address_space,
        check=False,
    )
    assert done.stderr == ""  # no traceback, no MemoryError
    return done.returncode, done.stdout.splitlines()


def test_a_character_device_is_refused_not_read() -> None:
    """/dev/zero has size 0: it used to be read to the end, which it has not."""
    assert validate("/dev/zero") == (1, [f"/dev/zero: is a character device, {NOT_A_FILE}"])


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    pipe = tmp_path / "policy.yaml"
    os.mkfifo(pipe)
    assert validate(str(pipe)) == (1, [f"{pipe}: is a named pipe, {NOT_A_FILE}"])


def test_standard_input_is_read_no_further_than_the_limit() -> None:
    with open("/dev/zero", "rb") as zeros:
        assert validate("-", stdin=zeros) == (1, [f"<stdin>: is longer than {TOO_LARGE}"])


def test_a_ten_megabyte_flat_list_is_not_read(tmp_path: Path) -> None:
    """It took 44 s and 2.1 GB, then said aliases expanded too far."""
    path = tmp_path / "flat.yaml"
    path.write_text(POLICY + "spec: {x: [" + "1," * 5_000_000 + "1]}\n")
    assert validate(str(path)) == (1, [f"{path}: is 9.5 MiB, more than {TOO_LARGE}"])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("flat.yaml", POLICY + "spec: {x: [" + "1," * 1_800_000 + "1]}\n"),
        ("flat.json", "[" + "[]," * 1_300_000 + "[]]"),
    ],
)
def test_a_flat_list_within_the_byte_limit_is_refused_by_its_count(
    tmp_path: Path, name: str, text: str
) -> None:
    """Under 4 MiB, but more values than fit in what etcd stores: refused as they are read,
    at the value past the limit, not once all are built."""
    path = tmp_path / name
    path.write_text(text)
    code, lines = validate(str(path))
    assert code == 1
    assert len(lines) == 1
    where, says = lines[0].split(": ", 1)
    assert where.startswith(f"{path}:")
    assert says == TOO_MANY


def test_a_file_of_many_small_documents_is_refused_by_its_count(tmp_path: Path) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(POLICY + "---\n[1, 2, 3, 4, 5, 6, 7]\n" * 150_000)
    code, lines = validate(str(path))
    assert code == 1
    assert [line.split(": ", 1)[1] for line in lines] == [
        "the file has more than 1,000,000 values in all, more than validate reads from one "
        "file; split it into smaller files"
    ]
