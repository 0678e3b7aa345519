"""`gpu-operator crds` and `gpu-operator validate`: their command lines. The work is in
`components.offline.commands`, imported when one of them runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from components.commands import deferred

run_crds = deferred("components.offline.commands", "run_crds")
run_validate = deferred("components.offline.commands", "run_validate")


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
    crds.set_defaults(handler=run_crds)

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
    validate.set_defaults(handler=run_validate)
