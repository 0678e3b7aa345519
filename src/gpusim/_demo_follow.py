"""What both demos do while the operator brings up the object that stands for the GPU
stack (a ClusterPolicy, a GPUCluster): read its status about once a second until the
demo's time runs out, and stop at once, pointing at the operator's log, if the operator
itself exits, since then nothing will ever change."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from components.errors import CommandError


def say(message: str) -> None:
    print(message, flush=True)


async def statuses(
    custom: Any,
    resource: tuple[str, str, str, str],
    operator: subprocess.Popen[bytes],
    log_path: Path,
    wait_seconds: float,
) -> AsyncIterator[tuple[float, dict[str, Any]]]:
    """The cluster-scoped `resource` (group, version, plural, name)'s status with the
    seconds since the first read, until `wait_seconds` have passed."""
    began = time.monotonic()
    while time.monotonic() - began < wait_seconds:
        if operator.poll() is not None:
            raise CommandError(
                f"the operator exited with status {operator.returncode}; see {log_path}"
            )
        obj = await custom.get_cluster_custom_object(*resource)
        yield time.monotonic() - began, obj.get("status") or {}
        await asyncio.sleep(1)
