"""Stopping the cluster's processes: ones that exit on SIGTERM go quietly, ones that ignore
it are killed and named, and none is left running."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from reconciler.envtest import Process, stop_together

_IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " + (
    "open('{ready}', 'w').close(); time.sleep(120)"
)
_EXITS_ON_TERM = "import time; open('{ready}', 'w').close(); time.sleep(120)"


def _started(tmp_path: Path, name: str, code: str) -> Process:
    ready = tmp_path / f"{name}.ready"
    process = Process(name, [sys.executable, "-c", code.format(ready=ready)], tmp_path / name)
    process.start()
    while not ready.exists():  # the signal disposition is set before the file appears
        assert process.alive(), process.log_tail()
        time.sleep(0.01)
    return process


def test_stubborn_processes_are_killed_and_named_the_others_exit(tmp_path: Path) -> None:
    polite = _started(tmp_path, "polite", _EXITS_ON_TERM)
    stubborn = [_started(tmp_path, f"stubborn-{i}", _IGNORES_TERM) for i in range(2)]
    pids = [p.pid for p in (polite, *stubborn)]

    killed = stop_together([polite, *stubborn], timeout=0.5)

    assert killed == ["stubborn-0", "stubborn-1"]
    for process, pid in zip((polite, *stubborn), pids, strict=True):
        assert not process.alive()
        assert pid is not None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"{process.name} (pid {pid}) still exists")


def test_stopping_twice_or_a_process_never_started_is_harmless(tmp_path: Path) -> None:
    never = Process("never", [sys.executable, "-c", "pass"], tmp_path / "never")
    polite = _started(tmp_path, "polite", _EXITS_ON_TERM)
    assert stop_together([never, polite]) == []
    polite.stop()
    assert not polite.alive()
