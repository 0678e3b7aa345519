"""What the node agent reads from the host's root filesystem (mounted at `/host`).

Plain files, no NVML: whether a kernel module is loaded (`/proc/driver/nvidia/version`),
whether a driver container serves it (the driver container publishes its root at
`/run/nvidia/driver`), whether the container toolkit is installed, and which pod a GPU
process belongs to (its cgroup path names the pod's UID, under both the cgroupfs and the
systemd cgroup drivers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DRIVER_VERSION_FILE = "proc/driver/nvidia/version"
DRIVER_CONTAINER_ROOT = "/run/nvidia/driver"
"""Where the driver container publishes its root on the host (`hostPaths.driverInstallDir`'s
default)."""
TOOLKIT_MARKERS = (
    "usr/local/nvidia/toolkit/nvidia-container-runtime",
    "run/nvidia/validations/toolkit-ready",
)
"""Either proves the toolkit is in place: its installed runtime (`toolkit.installDir`'s
default), or the validator's mark that it checked it."""

# `.../kubepods/burstable/pod<uid>/<container>` (cgroupfs) or
# `.../kubepods-burstable-pod<uid with _>.slice/...` (systemd)
_POD_UID = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
_MODULE_VERSION = re.compile(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)")


@dataclass(frozen=True)
class HostFacts:
    """What the host root says at one moment."""

    module_version: str | None
    """The loaded NVIDIA kernel module's version, None when none is loaded."""
    driver_container_root: bool
    """A driver container's root is published on the host."""
    toolkit_installed: bool


class HostRoot:
    """The host's filesystem under `root` (`/host` in the agent's pod, `/` on a machine)."""

    def __init__(self, root: Path | str, driver_root: str = DRIVER_CONTAINER_ROOT) -> None:
        self.root = Path(root)
        self.driver_root = self.root / driver_root.lstrip("/")

    def facts(self) -> HostFacts:
        return HostFacts(
            module_version=self.module_version(),
            driver_container_root=self._driver_container_root(),
            toolkit_installed=any((self.root / marker).exists() for marker in TOOLKIT_MARKERS),
        )

    def module_version(self) -> str | None:
        try:
            text = (self.root / DRIVER_VERSION_FILE).read_text(errors="replace")
        except OSError:
            return None
        found = _MODULE_VERSION.search(text)
        return found.group(1) if found else "unknown"

    def _driver_container_root(self) -> bool:
        root = self.driver_root
        try:
            return root.is_dir() and any(root.iterdir())
        except OSError:
            return False

    def pod_uid_of(self, pid: int) -> str | None:
        """The UID of the pod whose container runs `pid` (a host PID), None for a process
        outside any pod or one that already exited."""
        try:
            text = (self.root / "proc" / str(pid) / "cgroup").read_text(errors="replace")
        except OSError:
            return None
        found = _POD_UID.search(text)
        return found.group(1).replace("_", "-") if found else None
