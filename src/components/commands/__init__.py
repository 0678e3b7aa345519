"""The `gpu-operator` subcommands' command lines, cheap to import.

`components.cli` builds its parser from these modules on every start, even for `version`
or `--help`, so they import nothing heavy (no kubernetes_asyncio, aiohttp, pydantic,
prometheus): each one adds its subcommand's arguments and help, and its handler imports
the implementation (`components.run`, `components.demo`, `components.sim._cli`,
`components.api.commands`) only when that subcommand runs. A unit test keeps it that way.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable

Handler = Callable[[argparse.Namespace], int]


def deferred(module: str, name: str) -> Handler:
    """A handler that imports `module` and runs its `name` only when the subcommand runs
    (named `name`, so it reads as the implementation it stands for)."""

    def handler(args: argparse.Namespace) -> int:
        implementation: Handler = getattr(importlib.import_module(module), name)
        return implementation(args)

    handler.__name__ = handler.__qualname__ = name
    return handler
