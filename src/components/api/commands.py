"""The `gpu-operator crds` and `gpu-operator validate` subcommands: what they do (their
command line is `components.commands.api`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.api._crd import KINDS, render, render_all, write_all
from components.api._validate import Report, validate_files, validate_text
from components.cli import CommandError


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
    reports: list[Report] = []
    files: list[str] = args.files
    for name in files:
        if name == "-":
            reports.append(validate_text(sys.stdin.read(), "<stdin>"))
        else:
            reports.extend(validate_files([name]))
    for report in reports:
        if report.ok:
            if not args.quiet:
                print(f"{report.source}: ok")
            continue
        for line in report.lines():
            print(line)
    return 0 if all(r.ok for r in reports) else 1
