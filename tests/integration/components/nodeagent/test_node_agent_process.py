"""`gpu-operator node-agent` as its process, against a real API server, on a machine
without an NVIDIA driver (CI's): it still publishes what it sees, the node's
GPUDriverReady=False (DriverNotLoaded, with NVML's reason) beside kubelet's conditions,
and serves its metrics; with a GPU it would be the same loop over the real backend."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
