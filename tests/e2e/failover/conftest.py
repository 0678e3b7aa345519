"""Two operator replicas with `--leader-elect` on a simulated cluster of their own.

The API server keeps an audit log of every write (who, when, with what answer); each
replica's user agent names its lease identity, so the log says which replica wrote what,
in the API server's own order of events. Short lease timings keep each takeover quick.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from gpusim import ClusterConfig, SimulatedCluster, parse_os_list
from tests.e2e.operator._harness import OperatorProcess, attach_logs
from tests.e2e.upgrade.conftest import Watch, _install, watching

LEASE_SECONDS = 6.0
RENEW_SECONDS = 4.0
RETRY_SECONDS = 1.0
LEASE_FLAGS = (
    "--leader-elect",
    f"--leader-elect-lease-duration={LEASE_SECONDS:g}s",
    f"--leader-elect-renew-deadline={RENEW_SECONDS:g}s",
    f"--leader-elect-retry-period={RETRY_SECONDS:g}s",
)
FAILOVER_CLUSTER = ClusterConfig(
    gpu_nodes=3, cpu_nodes=1, gpus_per_node=2, os=parse_os_list("ubuntu22.04")
)
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""


@dataclass(frozen=True)
class AuditedWrite:
    """One write the API server answered, from its audit log."""

    received: datetime
    user_agent: str
    verb: str
    resource: str
    name: str
    code: int


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def writes(self) -> list[AuditedWrite]:
        found = []
        if not self.path.exists():
            return found
        for line in self.path.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the line being written right now
            if event.get("stage") != "ResponseComplete":
                continue
            ref = event.get("objectRef") or {}
            found.append(
                AuditedWrite(
                    received=datetime.fromisoformat(event["requestReceivedTimestamp"]),
                    user_agent=event.get("userAgent", ""),
                    verb=event.get("verb", ""),
                    resource=ref.get("resource", ""),
                    name=ref.get("name", ""),
                    code=int((event.get("responseStatus") or {}).get("code", 0)),
                )
            )
        return found


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> AuditLog:
    folder = tmp_path_factory.mktemp("audit")
    (folder / "policy.yaml").write_text(AUDIT_POLICY)
    return AuditLog(folder / "audit.log")


@pytest.fixture(scope="module")
def failover_cluster(audit_log: AuditLog) -> Iterator[SimulatedCluster]:
    audit = [
        f"--audit-policy-file={audit_log.path.parent / 'policy.yaml'}",
        f"--audit-log-path={audit_log.path}",
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
    ]
    with SimulatedCluster(FAILOVER_CLUSTER, extra_apiserver_args=audit) as sim:
        asyncio.run(_install(sim))
        yield sim


@pytest.fixture(scope="module")
def replicas(failover_cluster: SimulatedCluster) -> Iterator[list[OperatorProcess]]:
    logs = failover_cluster.workdir / "logs"
    processes = [
        OperatorProcess(failover_cluster.kubeconfig, logs / f"gpu-operator-{n}.log", LEASE_FLAGS)
        for n in ("a", "b")
    ]
    for process in processes:
        process.start()
    try:
        yield processes
    finally:
        for process in processes:
            process.resume()
            process.stop()


@pytest.fixture
async def watch(failover_cluster: SimulatedCluster) -> AsyncIterator[Watch]:
    async with watching(failover_cluster) as w:
        yield w


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.failed and hasattr(item, "funcargs"):
        args = item.funcargs
        attach_logs(
            report,
            args.get("replicas") or [],
            args.get("failover_cluster"),
            keep_as="failover",
            lines=60,
        )
    return report  # type: ignore[return-value]
