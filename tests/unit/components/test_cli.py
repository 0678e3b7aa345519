"""`gpu-operator` starts fast: `version` and `--help` load no cluster client, models or
controllers, yet every subcommand is listed with its help and reaches its implementation."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import components
from components.cli import build_parser, main
from components.commands.run import DEFAULT_NAMESPACE
from components.controllers import DEFAULT_NAMESPACE as CONTROLLERS_DEFAULT_NAMESPACE

pytestmark = pytest.mark.unit

SUBCOMMANDS = ["version", "crds", "validate", "demo", "run", "sim", "node-agent"]

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
    "components.run",
    "gpusim",
    "components.nodeagent",
    "pynvml",
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
        (["crds"], "components.offline.commands"),
        (["validate", "-"], "components.offline.commands"),
        (["demo"], "gpusim._demo"),
        (["run"], "components.run"),
        (["sim", "up"], "gpusim._cli"),
        (["sim", "down"], "gpusim._cli"),
        (["sim", "status"], "gpusim._cli"),
    ],
)
def test_each_handler_has_an_implementation(argv: list[str], implementation: str) -> None:
    handler = build_parser().parse_args(argv).handler
    assert callable(getattr(importlib.import_module(implementation), handler.__name__))


def test_the_default_namespace_is_the_controllers() -> None:
    assert DEFAULT_NAMESPACE == CONTROLLERS_DEFAULT_NAMESPACE


class _NoSimulator:
    """An import finder that answers for `gpusim` as an installation without it would."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "gpusim":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.mark.parametrize("argv", [["sim", "up"], ["sim", "status"], ["demo"]])
def test_without_the_simulator_sim_and_demo_say_so_in_one_sentence(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in the operator image, which leaves the simulator out: the import finds nothing.
    for name in [m for m in sys.modules if m == "gpusim" or m.startswith("gpusim.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoSimulator(), *sys.meta_path])
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith("gpu-operator: this installation does not include the gpusim")
    assert error.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "secure"),
    [
        ([], True),
        (["--metrics-secure"], True),
        (["--metrics-secure=true"], True),
        (["--metrics-secure=false"], False),
        (["--metrics-secure", "false"], False),
    ],
)
def test_metrics_are_secure_unless_turned_off(argv: list[str], secure: bool) -> None:
    from components.run import metrics_serving

    args = build_parser().parse_args(["run", *argv])
    serving = metrics_serving(args)
    assert serving is not None
    assert (serving.bind_address, serving.secure, serving.cert_dir) == (":8080", secure, None)


def test_secure_metrics_refuse_to_share_the_probes_port() -> None:
    from components.errors import CommandError
    from components.run import metrics_serving

    shared = ["run", "--metrics-bind-address=:8081", "--health-probe-bind-address=:8081"]
    with pytest.raises(CommandError, match="address of their own"):
        metrics_serving(build_parser().parse_args(shared))
    # Plain metrics may still be served beside the probes, as before.
    assert metrics_serving(build_parser().parse_args([*shared, "--metrics-secure=false"])) is None


def test_metrics_secure_takes_only_a_boolean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--metrics-secure=maybe"])
    assert "'maybe' is not true or false" in capsys.readouterr().err
