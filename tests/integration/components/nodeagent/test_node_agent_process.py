"""`gpu-operator node-agent` as its process, against a real API server, on a machine
without an NVIDIA driver (CI's): it still publishes what it sees, the node's
GPUDriverReady=False (DriverNotLoaded, with NVML's reason) beside kubelet's conditions,
and serves its metrics; with a GPU it would be the same loop over the real backend.
It reads its node from a watch: steps on a quiet node send the API server nothing, and a
change to the node (its condition removed) is seen and answered."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler import GVK, Cache, Client
from reconciler.envtest import ControlPlane, free_port
from reconciler.lowlevel import RESTMapper, Transport
from tests.polling import eventually

pytestmark = pytest.mark.integration

NODE = GVK("", "v1", "Node")
NAME = "agent-node"


@pytest.fixture
def agent(control_plane: ControlPlane, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port = free_port()
    log = tmp_path / "agent.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "components.cli",
                "node-agent",
                f"--kubeconfig={control_plane.kubeconfig}",
                f"--node-name={NAME}",
                f"--host-root={tmp_path}",
                f"--metrics-port={port}",
                "--interval=0.5",
                "--log-format=text",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
    try:
        yield port, log
    finally:
        process.terminate()
        process.wait(10)


async def test_the_agent_publishes_a_missing_driver_and_serves_metrics(
    api_client: Any, agent: tuple[int, Path]
) -> None:
    port, log = agent
    transport = Transport(api_client)
    mapper = RESTMapper(transport)
    client = Client(transport, mapper, Cache(transport, mapper), field_manager="agent-check")
    await client.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NAME}})
    kubelet = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}
    await client.request(
        "PATCH",
        f"/api/v1/nodes/{NAME}/status",
        body={"status": {"conditions": [kubelet]}},
        content_type="application/strategic-merge-patch+json",
    )

    try:
        await _check(client, port, log)
    finally:
        await client.delete(NODE, NAME, missing_ok=True)  # the control plane is shared


async def _check(client: Client, port: int, log: Path) -> None:
    async def reported() -> dict[str, Any] | None:
        node = await client.get_live(NODE, NAME)
        found = {c["type"]: c for c in node.get("status", {}).get("conditions") or []}
        return found if "GPUDriverReady" in found else None

    found = await eventually(reported, "the agent's conditions", seconds=60)
    driver = found["GPUDriverReady"]
    assert (driver["status"], driver["reason"]) == ("False", "DriverNotLoaded"), log
    assert "NVML" in driver["message"]
    assert found["GPUHealthy"]["status"] == "Unknown"
    assert found["Ready"]["reason"] == "KubeletReady"  # kubelet's condition is left alone

    await _quiet_steps_send_nothing(client, port)

    def metrics() -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text: str = r.read().decode()
        except OSError:
            return None
        return text if "gpu_operator_node_condition" in text else None

    text = await eventually(metrics, "the agent's metrics", seconds=30)
    assert (
        'gpu_operator_node_condition{condition="GPUDriverReady",reason="DriverNotLoaded",'
        'status="False"} 1.0' in text
    )


def _agent_requests(port: int) -> dict[str, int]:
    """The agent's own request counts by verb (`rest_client_requests_total`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        text = r.read().decode()
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "rest_client_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    method = sample.labels["method"]
                    counts[method] = counts.get(method, 0) + int(sample.value)
    return counts


async def _quiet_steps_send_nothing(client: Client, port: int) -> None:
    async def counted() -> dict[str, int] | None:
        # The agent counts a request once its answer is in: a moment after the write the
        # test has just read back.
        counts = await asyncio.to_thread(_agent_requests, port)
        return counts if counts.get("PATCH") else None

    before = await eventually(counted, "the agent counting the PATCH it sent", seconds=30)
    await asyncio.sleep(3.0)  # six steps at --interval=0.5
    after = await asyncio.to_thread(_agent_requests, port)
    assert after == before, f"a quiet node cost requests: {before} -> {after}"

    # A change to the node reaches the agent through its watch: it puts its condition back.
    drop = {"status": {"conditions": [{"type": "GPUDriverReady", "$patch": "delete"}]}}
    await client.request(
        "PATCH",
        f"/api/v1/nodes/{NAME}/status",
        body=drop,
        content_type="application/strategic-merge-patch+json",
    )

    async def restored() -> bool:
        node = await client.get_live(NODE, NAME)
        types = {c["type"] for c in node.get("status", {}).get("conditions") or []}
        return "GPUDriverReady" in types

    await eventually(restored, "the agent publishing its condition again", seconds=30)
