"""The `gpu-operator` command line.

Each subcommand registers itself here from its module in `components.commands`, so the CLI
stays a thin dispatcher and errors reach the user as one sentence instead of a traceback.
Those modules are cheap to import: a subcommand's implementation (the cluster client, the
models, the controllers) is imported only when that subcommand runs, so `version` and
`--help` start at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from components import __version__
from components.commands import demo, hooks, node_agent, offline, plan, run, sim
from components.errors import CommandError

Handler = Callable[[argparse.Namespace], int]


def _version(_: argparse.Namespace) -> int:
    print(f"gpu-operator {__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpu-operator",
        description="Install and keep healthy the NVIDIA GPU stack on every GPU node.",
    )
    parser.add_argument("--version", action="version", version=f"gpu-operator {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(handler=_version)
    offline.register(sub)
    plan.register(sub)
    demo.register(sub)
    hooks.register(sub)
    node_agent.register(sub)
    run.register(sub)
    sim.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except CommandError as exc:
        print(f"gpu-operator: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    # Import by name: `python -m components.cli` would otherwise run a second copy of this
    # module, whose CommandError the subcommands (importing the first copy) never raise.
    from components.cli import main as installed_main

    sys.exit(installed_main())
