"""`gpu-operator run`'s command line: the reference's flags and defaults, and mistakes
answered in one sentence."""

from __future__ import annotations

import pytest

from components.cli import build_parser, main

pytestmark = pytest.mark.unit


def test_defaults_are_the_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPERATOR_NAMESPACE", raising=False)
    args = build_parser().parse_args(["run"])
    assert args.metrics_bind_address == ":8080"
    assert args.health_probe_bind_address == ":8081"
    assert args.leader_elect is False
    assert args.namespace == "gpu-operator"
    assert args.kubeconfig is None


def test_namespace_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPERATOR_NAMESPACE", "nvidia-gpu-operator")
    assert build_parser().parse_args(["run"]).namespace == "nvidia-gpu-operator"


@pytest.mark.parametrize("address", ["nonsense", "host:99999", ":port"])
def test_a_bad_address_is_refused(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--metrics-bind-address", address])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_zero_turns_an_address_off() -> None:
    args = build_parser().parse_args(["run", "--metrics-bind-address", "0"])
    assert args.metrics_bind_address == "0"


def test_a_missing_kubeconfig_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--kubeconfig", "/nonexistent/kubeconfig"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpu-operator: cannot read the kubeconfig /nonexistent/kubeconfig")
    assert len(err.strip().splitlines()) == 1


def test_lease_timings_default_to_the_references() -> None:
    args = build_parser().parse_args(["run"])
    assert (
        args.leader_elect_lease_duration,
        args.leader_elect_renew_deadline,
        args.leader_elect_retry_period,
    ) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("4s", 4.0), ("500ms", 0.5), ("1m30s", 90.0), ("2.5", 2.5)]
)
def test_lease_timings_take_go_durations(text: str, seconds: float) -> None:
    args = build_parser().parse_args(["run", "--leader-elect-lease-duration", text])
    assert args.leader_elect_lease_duration == seconds


@pytest.mark.parametrize("text", ["soon", "4x", "0s", "-1", "s"])
def test_a_bad_duration_is_refused(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", f"--leader-elect-retry-period={text}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--leader-elect-retry-period" in err and "Traceback" not in err


def test_lease_timings_out_of_order_are_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "--leader-elect",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=5s",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "--leader-elect-lease-duration (4s) must be longer than" in err
    assert len(err.strip().splitlines()) == 1
