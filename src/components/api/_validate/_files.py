"""Which files an argument names and what text they hold, as kubectl reads them: a directory
stands for its `*.yaml`, `*.yml` and `*.json` files (not its subdirectories, as without
`--recursive`), and a file must be UTF-8 (or UTF-16 with a byte-order mark) text.

Anything else is one sentence, never a traceback: a binary file, bytes that are not UTF-8,
a file far larger than any request the API server takes."""

from __future__ import annotations

import codecs
from pathlib import Path

#: kubectl's extensions for the files of a directory.
EXTENSIONS = (".yaml", ".yml", ".json")
#: The API server refuses a request body over 3 MiB; a file 16 times that is not a set of
#: resources anyone applies, so it is refused before it is read into memory.
MAX_FILE_BYTES = 48 * 1024 * 1024


class Unreadable(Exception):
    """Why a file's text cannot be had, in one sentence."""


def expand(path: Path) -> list[Path]:
    """The files an argument names: itself, or a directory's manifests in name order."""
    if not path.is_dir():
        return [path]
    return sorted(p for p in path.iterdir() if p.suffix in EXTENSIONS and p.is_file())


def mebibytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def read_text(path: Path) -> str:
    """The file's text. Raises `Unreadable`."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise Unreadable(
                f"is {mebibytes(size)}, far more than the API server accepts in one request "
                "(3 MiB); not read"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    return decode(data)


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
