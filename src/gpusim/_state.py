"""Where a background simulated cluster (`sim up`) keeps its state, and how it is stopped.

The state folder holds the cluster's files (etcd data, certificates, kubeconfig, logs) and
`state.json`: each process's pid and start time, so `sim down` never signals a process that
merely reuses a recorded pid. `up.lock` is held while `sim up` starts a cluster.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpusim._errors import SimAlreadyRunningError
from reconciler.envtest import cache_root

STATE_FILE = "state.json"
LOCK_FILE = "up.lock"
CLUSTER_DIR = "cluster"  # the cluster's own files: etcd data, certificates, kubeconfig, logs


def state_dir() -> Path:
    """`$GPU_OPERATOR_SIM_DIR`, else `<cache>/sim` (`~/.cache/gpu-operator/sim`)."""
    configured = os.environ.get("GPU_OPERATOR_SIM_DIR")
    return Path(configured) if configured else cache_root() / "sim"


def start_ticks(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot), or None if no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; fields after its `)` are fixed.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


@dataclass(frozen=True)
class RecordedProcess:
    name: str
    pid: int
    started: int

    @classmethod
    def of(cls, name: str, pid: int) -> RecordedProcess:
        return cls(name, pid, start_ticks(pid) or 0)

    def alive(self) -> bool:
        return self.started != 0 and start_ticks(self.pid) == self.started


@dataclass
class SimState:
    """What `sim up` wrote: the kubeconfig and the processes to stop."""

    kubeconfig: str
    processes: list[RecordedProcess] = field(default_factory=list)
    summary: str = ""
    status: str = "starting"

    def running(self) -> list[RecordedProcess]:
        return [p for p in self.processes if p.alive()]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> SimState:
        data: dict[str, Any] = json.loads(text)
        processes = [RecordedProcess(**p) for p in data.pop("processes", [])]
        return cls(processes=processes, **data)


def read_state(folder: Path) -> SimState | None:
    try:
        return SimState.from_json((folder / STATE_FILE).read_text())
    except (OSError, ValueError, TypeError):
        return None


def write_state(folder: Path, state: SimState) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (STATE_FILE + ".tmp")
    tmp.write_text(state.to_json())
    tmp.replace(folder / STATE_FILE)


@contextlib.contextmanager
def up_lock(folder: Path) -> Iterator[None]:
    """Held while a cluster starts from `folder`; a second `sim up` is told so."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / LOCK_FILE).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SimAlreadyRunningError(
                f"a simulated cluster is being started from {folder} right now; wait for it "
                "or stop it with `gpu-operator sim down`"
            ) from None
        yield


def stop_processes(processes: Sequence[RecordedProcess], timeout: float = 10.0) -> None:
    """SIGTERM every live process group, then SIGKILL whatever outlives one shared
    `timeout` (not one per process: a loaded machine makes each slow to exit)."""
    for process in processes:
        if process.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(p.alive() for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    for process in processes:
        if process.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


def remove_state(folder: Path) -> None:
    """Remove the cluster's files (the folder itself only when nothing else is in it)."""
    shutil.rmtree(folder / CLUSTER_DIR, ignore_errors=True)
    for name in (STATE_FILE, STATE_FILE + ".tmp", LOCK_FILE):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()
