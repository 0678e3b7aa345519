"""One child process of the control plane, its log file, and a stop that always works.

Children are put in their own process group (so a stop reaches anything they spawn) and,
unless asked to outlive us, get SIGKILL from the kernel when the starting process dies, so
an interrupted or killed test run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Process:
    """A named child process whose output goes to `log_path`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool = True,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._env = dict(env) if env is not None else None
        self._die_with_parent = die_with_parent
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        preexec: Callable[[], None] | None = _die_with_parent if self._die_with_parent else None
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
                preexec_fn=preexec,
            )

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL whatever is left after `timeout`."""
        stop_together([self], timeout)

    def _terminate(self) -> None:
        if self._popen is not None and self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGTERM)

    def _wait_until(self, deadline: float) -> bool:
        """Whether the process has exited by `deadline` (monotonic seconds)."""
        if self._popen is None:
            return True
        try:
            self._popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _reap(self) -> None:
        """SIGKILL the group (the process, if still there, and anything it left behind)."""
        popen = self._popen
        if popen is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        self._popen = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def stop_together(processes: Iterable[Process], timeout: float = 10.0) -> list[str]:
    """SIGTERM every process at once and give them one `timeout` between them; SIGKILL
    the ones still running then. Returns the names of those that had to be killed.

    One shared deadline, not one per process: stopping a cluster's six processes one after
    another could take a minute when a loaded machine makes each of them slow to exit."""
    chosen = list(processes)
    for process in chosen:
        process._terminate()
    deadline = time.monotonic() + timeout
    killed = [p.name for p in chosen if not p._wait_until(deadline)]
    for process in chosen:
        process._reap()
    return killed
