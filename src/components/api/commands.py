"""The `gpu-operator crds` and `gpu-operator validate` subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.api._crd import KINDS, render, render_all, write_all
from components.api._validate import Report, validate_files, validate_text


def _crds(args: argparse.Namespace) -> int:
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
        from components.cli import CommandError  # the CLI imports this module

        raise CommandError(f"cannot write the CRDs to {directory}: {exc.strerror or exc}") from exc
    for path in written:
        print(f"wrote {path}")
    return 0


def _validate(args: argparse.Namespace) -> int:
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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `crds` and `validate` to the `gpu-operator` command line."""
    crds = sub.add_parser(
        "crds",
        help="print the CustomResourceDefinitions (or write them to a directory)",
        description="Print the ClusterPolicy and NVIDIADriver CRDs, generated from the models.",
    )
    crds.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="write one file per CRD into DIR instead of printing",
    )
    crds.add_argument(
        "--check",
        action="store_true",
        help="with --output-dir: write nothing, exit 1 if the files there are out of date",
    )
    crds.set_defaults(handler=_crds)

    validate = sub.add_parser(
        "validate",
        help="check ClusterPolicy / NVIDIADriver YAML files offline",
        description=(
            "Check ClusterPolicy and NVIDIADriver files with the same rules as the CRDs "
            "(schema and CEL rules), without a cluster. Prints `file: path.to.field: "
            "message` per problem; exits 1 if there is any."
        ),
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="YAML files; - reads stdin")
    validate.add_argument(
        "-q", "--quiet", action="store_true", help="print only problems, not `file: ok`"
    )
    validate.set_defaults(handler=_validate)
