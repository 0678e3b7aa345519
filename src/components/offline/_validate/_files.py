"""Which files an argument names and what text they hold, as kubectl reads them: a directory
stands for its `*.yaml`, `*.yml` and `*.json` files (not its subdirectories, as without
`--recursive`), and a file must be UTF-8 (or UTF-16 with a byte-order mark) text.

Anything else is one sentence, never a traceback: a binary file, bytes that are not UTF-8,
a file larger than `MAX_FILE_BYTES`, and anything that is not a regular file (a named
pipe, a device, a socket), which is refused without waiting on it: standard input (`-`)
is the way to pipe text in. No more than `MAX_FILE_BYTES` + 1 bytes are ever read.
"""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path
from typing import IO

from components.api.limits import MAX_FILE_BYTES, mebibytes

#: kubectl's extensions for the files of a directory.
EXTENSIONS = (".yaml", ".yml", ".json")

_SPECIAL = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class Unreadable(Exception):
    """Why a file's text cannot be had, in one sentence."""


def expand(path: Path) -> list[Path]:
    """The files an argument names: itself, or a directory's manifests in name order."""
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix in EXTENSIONS and p.is_file())


def _too_large(size: int | None) -> Unreadable:
    """`size` where it is known (a regular file's), else the stream is only known to be
    longer than the limit."""
    limit = mebibytes(MAX_FILE_BYTES)
    shown = f"{size:,} bytes" if size is not None and mebibytes(size) == limit else None
    what = f"is {shown or mebibytes(size)}, more than" if size is not None else "is longer than"
    return Unreadable(
        f"{what} the {limit} validate reads from one file (the API server takes at most "
        "3 MiB a resource): split it; not read"
    )


def read_text(path: Path) -> str:
    """The file's text. Raises `Unreadable`."""
    try:
        # Non-blocking, so that opening a named pipe does not wait for a writer.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    with open(descriptor, "rb") as file:
        try:
            info = os.fstat(descriptor)
            if not stat.S_ISREG(info.st_mode):
                what = _SPECIAL.get(stat.S_IFMT(info.st_mode), "not a regular file")
                raise Unreadable(
                    f"is {what}, not a regular file: pass its content on standard input "
                    "(`gpu-operator validate -`) instead; not read"
                )
            if info.st_size > MAX_FILE_BYTES:
                raise _too_large(info.st_size)
            data = file.read(MAX_FILE_BYTES + 1)  # a file that grows, or /proc's size 0
        except OSError as exc:
            raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise _too_large(None)
    return decode(data)


def read_stream(stream: IO[bytes] | IO[str]) -> str:
    """Standard input's text, read up to `MAX_FILE_BYTES` + 1 bytes (characters, for a
    text stream with no bytes under it). Raises `Unreadable`."""
    data = bytearray()
    left = MAX_FILE_BYTES + 1
    try:
        while left > 0:
            chunk = stream.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)
            data += chunk.encode("utf-8", "surrogatepass") if isinstance(chunk, str) else chunk
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    if left <= 0:
        raise _too_large(None)
    return decode(bytes(data))


def decode(data: bytes) -> str:
    """UTF-8 (a byte-order mark allowed) or UTF-16 with its mark, as the YAML spec allows.
    Raises `Unreadable`."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise Unreadable("is not text: it starts as UTF-16 but does not decode") from None
    if b"\0" in data[:8192]:
        raise Unreadable("is a binary file, not YAML or JSON")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise Unreadable(
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line} (YAML and JSON "
            "manifests must be UTF-8)"
        ) from None
