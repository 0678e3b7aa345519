"""Rendered like the reference: for each policy of a matrix, NVIDIA's GPU Operator (built
from its Go module by hack/build-reference.sh) and ours each run on a fresh simulated
cluster of the same shape; every object either made (DaemonSets and Deployments with their
pod templates, ServiceAccounts, RBAC, RuntimeClasses, ConfigMaps, Services) is read back
from the API server and compared field by field. A difference that
allowed-differences.yaml does not explain fails the test with a readable diff.

The reference gets the images its Helm chart (26.7) would set, through the environment
variables it reads; ours gets none, so its own defaults must be those images.

CI runs the core cases (the reference's sample policy and the chart's defaults); set
FIDELITY_MATRIX=full for the options that change a pod spec: precompiled drivers, CDI,
MPS, MIG mixed, GPUDirect (GDS, GDRCopy, RDMA), custom host paths, env overrides, a digest
version, RHEL nodes, and the sandbox (VM) stack on vm-passthrough nodes with the vGPU manager
on. Not in the matrix: hostNetwork and the NRI plugin, fields the buildable reference
predates.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpusim import ClusterConfig, parse_os_list
from tests.e2e.fidelity._compare import diff_objects, load_allowlist, report, unexplained
from tests.e2e.fidelity._run import NAMESPACE, Case, run_ours, run_reference
from tests.reference_chart import COMPAT, REFERENCE_VALUES, reference_chart_images
from tests.tools import CHART, run

HERE = Path(__file__).resolve().parent
ALLOWLIST = HERE / "allowed-differences.yaml"


def sample_policy() -> dict[str, Any]:
    policy: dict[str, Any] = yaml.safe_load(
        (COMPAT / "nvidia-clusterpolicy-sample.yaml").read_text()
    )
    return policy


def chart_policy() -> dict[str, Any]:
    """The ClusterPolicy our chart renders from the reference chart's values file."""
    out = run(
        "helm", "template", "gpu", CHART, "--namespace", NAMESPACE, "--values", REFERENCE_VALUES
    ).stdout
    (policy,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "ClusterPolicy"]
    return dict(policy)


def with_spec(
    base: Callable[[], dict[str, Any]], patch: dict[str, Any]
) -> Callable[[], dict[str, Any]]:
    """`base` with `patch` merged into its spec (maps merged key by key, the rest replaced)."""

    def merge(into: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
        out = dict(into)
        for key, value in change.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = value
        return out

    return lambda: merge(base(), {"spec": patch})


CLUSTER = ClusterConfig(
    gpu_nodes=2,
    cpu_nodes=1,
    gpus_per_node=2,
    product="NVIDIA-A100-SXM4-40GB",
    mig_capable=True,
    mig_reconfigure_seconds=0.1,
)
"""Two MIG-capable GPU nodes on one OS (the reference renders one driver DaemonSet, for the
OS of the first GPU node it lists; ours renders the MIG manager only where a node can use
it) and one CPU node."""
RHEL = replace(CLUSTER, os=parse_os_list("rhel9.4"))

DIGEST = "sha256:" + "5f0c3e1a9b7d2468" * 4
DRIVER_IMAGE = {"repository": "nvcr.io/nvidia", "image": "driver"}
MPS_CONFIG = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "plugin-configs"},
    "data": {
        "mps-2": "version: v1\nsharing:\n  mps:\n    resources:\n"
        "    - name: nvidia.com/gpu\n      replicas: 2\n"
    },
}
ENV = [{"name": "FIDELITY_TEST", "value": "1"}]

CORE = [
    Case("sample", sample_policy, CLUSTER),
    Case("chart-defaults", chart_policy, CLUSTER),
]
FULL = [
    Case(
        "precompiled",
        with_spec(
            sample_policy, {"driver": {**DRIVER_IMAGE, "version": "595", "usePrecompiled": True}}
        ),
        CLUSTER,
    ),
    Case("cdi", with_spec(sample_policy, {"cdi": {"enabled": True, "default": True}}), CLUSTER),
    Case(
        "mps",
        with_spec(
            sample_policy,
            {"devicePlugin": {"config": {"name": "plugin-configs", "default": "mps-2"}}},
        ),
        CLUSTER,
        objects=[MPS_CONFIG],
    ),
    Case("mig-mixed", with_spec(sample_policy, {"mig": {"strategy": "mixed"}}), CLUSTER),
    Case(
        "gpudirect",
        with_spec(
            sample_policy,
            {
                "gds": {"enabled": True},
                "gdrcopy": {"enabled": True},
                "driver": {"rdma": {"enabled": True}},
            },
        ),
        CLUSTER,
    ),
    Case(
        "host-paths",
        with_spec(
            sample_policy,
            {"hostPaths": {"rootFS": "/host-root", "driverInstallDir": "/opt/nvidia/driver"}},
        ),
        CLUSTER,
    ),
    Case(
        "env",
        with_spec(
            sample_policy,
            {
                section: {"env": ENV}
                for section in (
                    "driver",
                    "toolkit",
                    "devicePlugin",
                    "dcgm",
                    "dcgmExporter",
                    "gfd",
                    "migManager",
                )
            }
            | {
                "validator": {
                    "env": ENV,
                    **{step: {"env": ENV} for step in ("driver", "toolkit", "cuda", "plugin")},
                }
            },
        ),
        CLUSTER,
    ),
    Case(
        "digest", with_spec(sample_policy, {"driver": {**DRIVER_IMAGE, "version": DIGEST}}), CLUSTER
    ),
    Case("rhel", sample_policy, RHEL),
    Case(
        "sandbox",
        with_spec(
            sample_policy,
            {
                "sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-passthrough"},
                "vgpuManager": {
                    "enabled": True,
                    "repository": "registry.example/nvidia",
                    "image": "vgpu-manager",
                    "version": "595.58",
                },
            },
        ),
        CLUSTER,
    ),
]


CASES = CORE + (FULL if os.environ.get("FIDELITY_MATRIX") == "full" else [])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_our_objects_are_the_references(case: Case, reference_folder: Path) -> None:
    allowlist = load_allowlist(ALLOWLIST)
    reference = run_reference(case, reference_folder, reference_chart_images())
    ours = run_ours(case)
    left = unexplained(diff_objects(ours, reference), allowlist, case.id)
    assert not left, report(left, case.id, ALLOWLIST)
