"""The agent's `/metrics`: what a dashboard reads per GPU, and no series for what a GPU
does not report (an unsupported ECC counter is absent, not zero)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from components.nodeagent import (
    AgentMetrics,
    EccCounts,
    HostRoot,
    NodeAgent,
    SimulatedGpu,
    SimulatedNvml,
    verdicts,
)

pytestmark = pytest.mark.unit


def test_per_gpu_series_and_xids(tmp_path: Path) -> None:
    gpus = [
        SimulatedGpu("GPU-a", "NVIDIA L4", 23034, ecc=EccCounts(volatile_uncorrected=0)),
        SimulatedGpu("GPU-b", "NVIDIA L4", 23034),
    ]
    nvml = SimulatedNvml(gpus, driver="580.95.05", cuda="13.0")
    metrics = AgentMetrics()
    agent = NodeAgent(
        "n1",
        nvml_opener=lambda: nvml,
        host=HostRoot(tmp_path),
        api=None,
        metrics=metrics,  # type: ignore[arg-type]
    )
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}}
    obs = agent.observe(node)
    metrics.observe(obs, verdicts(obs))
    nvml.raise_xid(1, 79)
    obs = agent.observe(node)
    metrics.observe(obs, verdicts(obs))
    text = generate_latest(metrics.registry).decode()
    assert "gpu_operator_node_gpus 2.0" in text
    ecc = [line for line in text.splitlines() if line.startswith("gpu_operator_node_ecc_")]
    assert ecc == ['gpu_operator_node_ecc_uncorrected_errors{gpu="0",uuid="GPU-a"} 0.0']
    assert 'gpu_operator_node_xid_errors_total{gpu="1",uuid="GPU-b",xid="79"} 1.0' in text
    assert (
        'gpu_operator_node_condition{condition="GPUHealthy",reason="XID",status="False"} 1.0'
        in text
    )
    assert (
        'gpu_operator_node_driver_info{cuda_version="13.0",driver_version="580.95.05",'
        'host_driver="false"} 1.0' in text
    )
