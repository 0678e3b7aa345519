"""The `gpu-operator crds` and `gpu-operator validate` subcommands: what they do (their
command line is `components.commands.api`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.api._crd import KINDS, render, render_all, write_all
from components.api._unsupported import unsupported_in_text
from components.api._validate import Report, validate_files, validate_text
from components.errors import CommandError


def run_crds(args: argparse.Namespace) -> int:
    directory: Path | None = args.output_dir
    if directory is None:
        if args.check:
            print("gpu-operator: --check needs --output-dir", file=sys.stderr)
            return 2
        sys.stdout.write(render_all())
        return 0
    if args.check:
        stale = [
            kind.file_name
            for kind in KINDS
            if not (directory / kind.file_name).is_file()
            or (directory / kind.file_name).read_text() != render(kind)
        ]
        for name in stale:
            print(f"{directory / name}: differs from the models; run hack/generate-crds.sh")
        return 1 if stale else 0
    try:
        written = write_all(directory)
    except OSError as exc:
        raise CommandError(f"cannot write the CRDs to {directory}: {exc.strerror or exc}") from exc
    for path in written:
        print(f"wrote {path}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Problems make the exit status 1; fields accepted but not acted on are warnings (also
    printed with --quiet), as the operator's `Unsupported` condition would name them."""
    reports: list[tuple[Report, list[str]]] = []
    files: list[str] = args.files
    for name in files:
        if name == "-":
            text = sys.stdin.read()
            reports.append(
                (validate_text(text, "<stdin>"), list(unsupported_in_text(text, "<stdin>")))
            )
            continue
        for report in validate_files([name]):
            reports.append((report, _warnings(Path(name), report.source)))
    for report, warnings in reports:
        if report.ok and not args.quiet:
            print(f"{report.source}: ok")
        for line in [*report.lines(), *warnings]:
            print(line)
    return 0 if all(r.ok for r, _ in reports) else 1


def _warnings(path: Path, source: str) -> list[str]:
    try:
        text = path.read_text()
    except OSError:
        return []  # the report says why it cannot be read
    return list(unsupported_in_text(text, source))
