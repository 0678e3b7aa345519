"""The `gpu-operator` subcommands' command lines, cheap to import.

`components.cli` builds its parser from these modules on every start, even for `version`
or `--help`, so they import nothing heavy (no kubernetes_asyncio, aiohttp, pydantic,
prometheus): each one adds its subcommand's arguments and help, and its handler imports
the implementation (`components.run`, `components.offline.commands`, or the simulator's
`gpusim._cli` and `gpusim._demo`) only when that subcommand runs. A unit test keeps it that
way.

The simulator is named only as a string: the product never imports it (an import-linter
contract), and the operator image does not carry it, where `sim` and `demo` say so.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]

# components.controllers.DEFAULT_NAMESPACE, which this package must not import (it brings in
# every controller); a unit test keeps the two equal.
DEFAULT_NAMESPACE = "gpu-operator"


def deferred(module: str, name: str) -> Handler:
    """A handler that imports `module` and runs its `name` only when the subcommand runs
    (named `name`, so it reads as the implementation it stands for)."""

    def handler(args: argparse.Namespace) -> int:
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            package = module.split(".", 1)[0]
            if exc.name != package:
                raise
            from components.errors import CommandError

            raise CommandError(
                f"this installation does not include the {package} package (the operator "
                "image leaves the simulator out); install gpu-operator from its source tree"
            ) from None
        implementation: Handler = getattr(loaded, name)
        return implementation(args)

    handler.__name__ = handler.__qualname__ = name
    return handler


def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """`--kubeconfig` and `--namespace`, read as the operator reads them: `plan` must find
    the cluster and the operands where `run` would."""
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster, else $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("OPERATOR_NAMESPACE") or DEFAULT_NAMESPACE,
        help="namespace the operands run in (default: $OPERATOR_NAMESPACE or gpu-operator)",
    )
