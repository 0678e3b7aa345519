"""Fixtures shared by every test layer.

`control_plane` is a real etcd + kube-apiserver (reconciler.envtest), started once per test
session. When a test that used it fails, the tail of each component's log is added to the
failure report and the full logs are copied to `.test-logs/`.
"""

from __future__ import annotations

import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import FrameType

import pytest
from kubernetes_asyncio import client, config

from reconciler.envtest import ControlPlane

REPO = Path(__file__).resolve().parent.parent
_failed_with_cluster: list[str] = []


def _sigterm_to_exit(signum: int, frame: FrameType | None) -> None:
    # Turn SIGTERM (CI timeouts, `kill`) into a normal exit so fixtures tear down.
    raise SystemExit(128 + signum)


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGTERM, _sigterm_to_exit)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The folder decides the layer, so `-m unit|integration|e2e` never misses a test.
    for item in items:
        parts = Path(str(item.path)).relative_to(REPO / "tests").parts
        if parts and parts[0] in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    began = time.monotonic()
    plane = ControlPlane().start()
    print(
        f"\ncontrol plane: kube-apiserver {plane.version()} ready in "
        f"{time.monotonic() - began:.1f}s at {plane.api_url}",
        file=sys.stderr,
    )
    try:
        yield plane
    finally:
        if _failed_with_cluster and plane.logs_dir.exists():
            target = REPO / ".test-logs" / time.strftime("%Y%m%d-%H%M%S")
            shutil.copytree(plane.logs_dir, target, dirs_exist_ok=True)
            print(f"\ncontrol-plane logs kept in {target}", file=sys.stderr)
        plane.stop()


@pytest.fixture
async def api_client(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=configuration
    )
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and "control_plane" in getattr(item, "fixturenames", ()):
        _failed_with_cluster.append(item.nodeid)
        plane = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        if isinstance(plane, ControlPlane):
            for name, tail in plane.log_tails().items():
                report.sections.append((f"{name} log (tail)", tail))
    return report  # type: ignore[return-value]
