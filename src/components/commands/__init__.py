"""The `gpu-operator` subcommands' command lines, cheap to import.

`components.cli` builds its parser from these modules on every start, even for `version`
or `--help`, so they import nothing heavy (no kubernetes_asyncio, aiohttp, pydantic,
prometheus): each one adds its subcommand's arguments and help, and its handler imports
the implementation (`components.run`, `components.demo`, `components.sim._cli`,
`components.api.commands`) only when that subcommand runs. A unit test keeps it that way.
"""
