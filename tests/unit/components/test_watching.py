"""What an admin watching the operator sees: its version, and within seconds a WARNING with
the cause when the API server cannot be reached (not silence until a timeout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from components import __version__
from components.cli import main

UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"gpu-operator {__version__}"


def test_unreachable_api_server_is_a_warning_with_its_cause_within_seconds(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    command = [sys.executable, "-m", "components.cli", "run", "--kubeconfig", str(kubeconfig)]
    command += ["--metrics-bind-address=0", "--health-probe-bind-address=0", "--log-format=json"]
    began = time.monotonic()
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        assert process.stderr is not None
        for raw in process.stderr:
            line = json.loads(raw)
            if line["level"] == "warning":
                break
        else:
            pytest.fail("the operator exited without a warning")
    finally:
        process.terminate()
        process.wait(timeout=30)
    # Generous, yet far below the 120 s cache-sync timeout that used to be the first sign.
    assert time.monotonic() - began < 30
    assert line["logger"] == "components.reachability"
    assert "https://127.0.0.1:9" in line["msg"]
    assert "Cannot connect" in line["msg"] or "refused" in line["msg"].lower()
