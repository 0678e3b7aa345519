"""`gpu-operator demo --dra`: the demo on the DRA stack. Instead of a ClusterPolicy, a
GPUCluster with its CRD's defaults (an empty `draDriver`, the one field it requires);
instead of a pod asking for `nvidia.com/gpu: 1`, a pod whose ResourceClaimTemplate asks
the `gpu.nvidia.com` DeviceClass for one GPU, allocated by kube-scheduler from the
ResourceSlices the simulated kubelet plugin publishes.

A GPUCluster deploys no driver (an NVIDIADriver or the host brings it): the demo gives
every GPU node a driver on the host, and says so. No container toolkit is needed: the DRA
driver hands GPUs to pods, DCGM and its exporter included, through claims.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from components.errors import CommandError
from gpusim._demo_follow import say as _say
from gpusim._demo_follow import statuses
from gpusim._dra_stack import DRIVER
from gpusim._nodes import ANNOTATION_HOST_DRIVER

GROUP, VERSION, PLURAL = "nvidia.com", "v1alpha1", "gpuclusters"
GPU_CLUSTER = "gpu-cluster"
HOST_DRIVER = "580.95.05"
GPU_POD = "gpu-demo"
CLAIM_TEMPLATE = "one-gpu"


async def drive_dra(
    api: Any,
    gpu_nodes: list[str],
    operator: subprocess.Popen[bytes],
    log_path: Path,
    wait_seconds: float,
) -> None:
    """From the host software to a claim-based pod Running, saying each step."""
    core: Any = client.CoreV1Api(api)
    for node in gpu_nodes:
        annotations = {ANNOTATION_HOST_DRIVER: HOST_DRIVER}
        await core.patch_node(node, {"metadata": {"annotations": annotations}})
    _say(f"GPU nodes given driver {HOST_DRIVER} on the host: a GPUCluster deploys no driver")
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GPUCluster",
        "metadata": {"name": GPU_CLUSTER},
        "spec": {"draDriver": {}},
    }
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    _say(f"created GPUCluster {GPU_CLUSTER}; waiting for it to become ready")
    await _follow(custom, operator, log_path, wait_seconds)
    await _show_slices(api)
    await _run_claim_pod(api, core, wait_seconds)


async def _follow(
    custom: Any, operator: subprocess.Popen[bytes], log_path: Path, wait_seconds: float
) -> None:
    """Its state and Ready message as they change, until `ready`."""
    shown = ""
    resource = (GROUP, VERSION, PLURAL, GPU_CLUSTER)
    async for elapsed, status in statuses(custom, resource, operator, log_path, wait_seconds):
        ready: dict[str, Any] = next(
            (c for c in status.get("conditions") or [] if c["type"] == "Ready"), {}
        )
        line = f"  {status.get('state', '-'):<9} {ready.get('message') or ''}".rstrip()
        if status.get("state") and line != shown:
            shown = line
            _say(f"[{elapsed:5.1f}s]{line}")
        if status.get("state") == "ready":
            _say(f"GPUCluster {GPU_CLUSTER} is ready after {elapsed:.1f}s")
            return
    raise CommandError(
        f"GPUCluster {GPU_CLUSTER} was not ready within {wait_seconds:.0f}s; last: {shown.strip()}"
        f"; operator log: {log_path}"
    )


async def _show_slices(api: Any) -> None:
    resource: Any = client.ResourceV1Api(api)
    listed = await resource.list_resource_slice(
        field_selector=f"spec.driver={DRIVER}", _preload_content=False
    )
    slices = (await listed.json()).get("items") or []
    for found in sorted(slices, key=lambda s: str(s["spec"].get("nodeName"))):
        devices = found["spec"].get("devices") or []
        products = sorted(
            {str(d["attributes"]["productName"]["string"]) for d in devices if "attributes" in d}
        )
        _say(
            f"  node {found['spec'].get('nodeName')} publishes {len(devices)} device(s) "
            f"of {DRIVER}: {', '.join(products)}"
        )


async def _run_claim_pod(api: Any, core: Any, wait_seconds: float) -> None:
    resource: Any = client.ResourceV1Api(api)
    request = {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CLAIM_TEMPLATE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    await resource.create_namespaced_resource_claim_template("default", template)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": GPU_POD},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": CLAIM_TEMPLATE}],
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.9.0-base-ubuntu24.04",
                    "command": ["sleep", "infinity"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    await core.create_namespaced_pod("default", pod)
    _say(
        f"created pod default/{GPU_POD} claiming one GPU of DeviceClass {DRIVER} "
        f"(ResourceClaimTemplate {CLAIM_TEMPLATE})"
    )
    began = time.monotonic()
    while time.monotonic() - began < wait_seconds:
        live = await core.read_namespaced_pod(GPU_POD, "default")
        if live.status.phase == "Running":
            claim_name = live.status.resource_claim_statuses[0].resource_claim_name
            response = await resource.read_namespaced_resource_claim(
                claim_name, "default", _preload_content=False
            )
            claim = await response.json()
            devices = claim["status"]["allocation"]["devices"]["results"]
            allocated = ", ".join(f"{d['pool']}/{d['device']}" for d in devices)
            _say(
                f"pod default/{GPU_POD} is Running on GPU node {live.spec.node_name}; "
                f"its claim default/{claim_name} is allocated {allocated}"
            )
            return
        await asyncio.sleep(0.5)
    raise CommandError(f"pod default/{GPU_POD} did not start within {wait_seconds:.0f}s")
