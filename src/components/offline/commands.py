"""The `gpu-operator crds` and `gpu-operator validate` subcommands: what they do (their
command line is `components.commands.offline`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from components.api import ClusterPolicy, NVIDIADriver, not_acted_on, unsupported_fields
from components.errors import CommandError
from components.offline._crd import (
    CLUSTER_POLICY,
    KINDS,
    NVIDIA_DRIVER,
    render,
    render_all,
    write_all,
)
from components.offline._validate import Report, validate_files, validate_stream


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
    """Problems (what the API server would refuse, and what cannot be read) make the exit
    status 1; fields accepted but not acted on, as the operator's `Unsupported` condition
    would name them, and a `status` the API server drops, are warnings (also printed with
    --quiet)."""
    reports: list[Report] = []
    files: list[str] = args.files
    for name in files:
        if name == "-":
            reports.append(validate_stream(getattr(sys.stdin, "buffer", sys.stdin)))
        else:
            reports.extend(validate_files([name]))
    for report in reports:
        if report.ok and not args.quiet:
            print(f"{report.source}: ok")
        for line in [*report.lines(), *_unsupported(report)]:
            print(line)
    return 0 if all(r.ok for r in reports) else 1


def _unsupported(report: Report) -> Iterator[str]:
    for label, document in report.resources:
        kind = document.get("kind")
        if kind not in (CLUSTER_POLICY.kind, NVIDIA_DRIVER.kind):
            continue  # a GPUCluster: every field of it is acted on
        model = ClusterPolicy if kind == CLUSTER_POLICY.kind else NVIDIADriver
        spec = model.from_dict(document).spec  # it passed validation (status left out)
        for field in unsupported_fields(spec):
            yield f"{report.where(label)}: warning: {not_acted_on(field)}"
