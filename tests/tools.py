"""The Go-built tools the install checks run (helm, kustomize, promtool), found where
hack/build-tools.sh caches them, at the versions hack/tool-versions.env pins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deployments" / "gpu-operator"


def _versions() -> dict[str, str]:
    lines = (REPO / "hack" / "tool-versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def tool(name: str) -> Path:
    """The binary, or a failure that says how to build it (never a skip: a missing tool is a
    missing check)."""
    key = {"promtool": "PROMETHEUS_VERSION"}.get(name, f"{name.upper()}_VERSION")
    cache = Path(os.environ.get("GPU_OPERATOR_CACHE") or Path.home() / ".cache" / "gpu-operator")
    path = cache / "bin" / f"{name}-{_versions()[key]}" / name
    if not path.is_file():
        pytest.fail(f"{path} is missing; run `bash hack/build-tools.sh`")
    return path


def run(
    name: str, *args: str | Path, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run a tool from the repository root; on failure the assertion shows its output."""
    done = subprocess.run(
        [tool(name), *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert done.returncode == 0, f"{name} {' '.join(map(str, args))}:\n{done.stderr}"
    return done
