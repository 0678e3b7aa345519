"""`gpu-operator` starts fast: `version` and `--help` load no cluster client, models or
controllers, yet every subcommand is listed with its help and reaches its implementation."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import components
import components.sim
from components.cli import build_parser, main
from components.commands.run import DEFAULT_NAMESPACE
from components.controllers import DEFAULT_NAMESPACE as CONTROLLERS_DEFAULT_NAMESPACE

pytestmark = pytest.mark.unit

SUBCOMMANDS = ["version", "crds", "validate", "demo", "run", "sim"]

# What a subcommand imports when it runs, never when the command line is built.
HEAVY = [
    "aiohttp",
    "kubernetes_asyncio",
    "prometheus_client",
    "pydantic",
    "yaml",
    "reconciler",
    "components.api",
    "components.controllers",
    "components.demo",
    "components.run",
    "components.sim._cluster",
    "components.sim._cli",
]


def test_building_the_command_line_imports_nothing_heavy() -> None:
    script = (
        "import json, sys\n"
        "from components.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    loaded = json.loads(out)
    assert [m for m in HEAVY if m in loaded] == []


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    listed = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"\n    {name} " in listed


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"gpu-operator {components.__version__}\n"


@pytest.mark.parametrize(
    ("argv", "implementation"),
    [
        (["crds"], "components.api.commands"),
        (["validate", "-"], "components.api.commands"),
        (["demo"], "components.demo"),
        (["run"], "components.run"),
        (["sim", "up"], "components.sim._cli"),
        (["sim", "down"], "components.sim._cli"),
        (["sim", "status"], "components.sim._cli"),
    ],
)
def test_each_handler_has_an_implementation(argv: list[str], implementation: str) -> None:
    handler = build_parser().parse_args(argv).handler
    assert callable(getattr(importlib.import_module(implementation), handler.__name__))


def test_the_default_namespace_is_the_controllers() -> None:
    assert DEFAULT_NAMESPACE == CONTROLLERS_DEFAULT_NAMESPACE


def test_the_simulated_cluster_is_still_importable_from_the_package() -> None:
    from components.sim._cluster import SimulatedCluster
    from components.sim._state import state_dir

    assert components.sim.SimulatedCluster is SimulatedCluster
    assert components.sim.state_dir is state_dir
    with pytest.raises(AttributeError):
        _ = components.sim.no_such_name  # type: ignore[attr-defined]
