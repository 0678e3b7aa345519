"""Realistic GPU Nodes, as a kubelet, NFD and GFD leave them, for the benchmarks.

About 80 labels (Kubernetes, NFD feature labels, NVIDIA labels), the usual annotations,
five conditions, node info, 40 container images and a kubelet's managedFields: roughly
what `kubectl get node -o json` shows on a GPU node.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

_NFD_FEATURES = [
    "cpu-cpuid.ADX", "cpu-cpuid.AESNI", "cpu-cpuid.AVX", "cpu-cpuid.AVX2", "cpu-cpuid.AVX512BW",
    "cpu-cpuid.AVX512CD", "cpu-cpuid.AVX512DQ", "cpu-cpuid.AVX512F", "cpu-cpuid.AVX512VL",
    "cpu-cpuid.CMPXCHG8", "cpu-cpuid.FMA3", "cpu-cpuid.FXSR", "cpu-cpuid.FXSROPT",
    "cpu-cpuid.IBPB", "cpu-cpuid.LAHF", "cpu-cpuid.MOVBE", "cpu-cpuid.OSXSAVE",
    "cpu-cpuid.SHA", "cpu-cpuid.STIBP", "cpu-cpuid.SYSCALL", "cpu-cpuid.SYSEE",
    "cpu-cpuid.VMX", "cpu-cpuid.X87", "cpu-cpuid.XGETBV1", "cpu-cpuid.XSAVE",
    "cpu-cpuid.XSAVEC", "cpu-cpuid.XSAVEOPT", "cpu-cpuid.XSAVES", "cpu-hardware_multithreading",
    "cpu-pstate.status", "cpu-pstate.turbo", "cpu-rdt.RDTCMT", "cpu-rdt.RDTL3CA",
    "cpu-rdt.RDTMBA", "cpu-rdt.RDTMBM", "cpu-rdt.RDTMON", "kernel-config.NO_HZ",
    "kernel-config.NO_HZ_IDLE", "memory-numa", "pci-10de.present", "pci-0302_10de.present",
    "pci-1d0f.present", "storage-nonrotationaldisk", "system-os_release.VERSION_ID.major",
    "system-os_release.VERSION_ID.minor",
]  # fmt: skip


def gpu_node(index: int) -> dict[str, Any]:
    name = f"gpu-node-{index:05d}"
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p5.48xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": f"us-east-1{'abc'[index % 3]}",
        "node-role.kubernetes.io/gpu": "",
        **{f"feature.node.kubernetes.io/{f}": "true" for f in _NFD_FEATURES},
        "feature.node.kubernetes.io/kernel-version.full": "6.8.0-1015-aws",
        "feature.node.kubernetes.io/kernel-version.major": "6",
        "feature.node.kubernetes.io/kernel-version.minor": "8",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/cuda.driver.major": "595",
        "nvidia.com/cuda.driver.minor": "91",
        "nvidia.com/cuda.runtime.major": "13",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu.deploy.node-status-exporter": "true",
        "nvidia.com/gpu.deploy.mig-manager": "true",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
    }
    ip = f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}"
    stamp = "2026-11-30T12:00:00Z"
    beat = f"2026-11-30T12:{index % 60:02d}:{(index * 7) % 60:02d}Z"
    conditions = [
        {
            "type": t,
            "status": "False" if t != "Ready" else "True",
            "lastHeartbeatTime": beat,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }
        for t, reason, message in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("NetworkUnavailable", "RouteCreated", "RouteController created a route"),
            ("Ready", "KubeletReady", "kubelet is posting ready status"),
        )
    ]  # fmt: skip
    resources = {
        "cpu": "192",
        "ephemeral-storage": "1967900568Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "2097152000Ki",
        "nvidia.com/gpu": "8",
        "pods": "110",
    }
    images = [
        {
            "names": [
                f"registry.example.com/team{i}/image{i}@sha256:{uuid.UUID(int=random.getrandbits(128)).hex}"
                f"{uuid.UUID(int=random.getrandbits(128)).hex}",
                f"registry.example.com/team{i}/image{i}:v1.{i}.0",
            ],
            "sizeBytes": 100_000_000 + i * 1_000_003,
        }
        for i in range(40)
    ]
    managed = [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": stamp,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {f"f:{k}": {} for k in list(labels)[:40]}},
                "f:status": {
                    "f:conditions": {f'k:{{"type":"{c["type"]}"}}': {} for c in conditions}
                },
            },
        }
        for manager in ("kubelet", "nfd-master", "gpu-feature-discovery", "kube-controller-manager")
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": str(1000 + index),
            "creationTimestamp": stamp,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{index:017x}"}}',
                "nfd.node.kubernetes.io/feature-labels": ",".join(_NFD_FEATURES),
                "nfd.node.kubernetes.io/master.version": "v0.17.0",
            },
            "managedFields": managed,
        },
        "spec": {
            "providerID": f"aws:///us-east-1a/i-{index:017x}",
            "podCIDR": f"100.{index // 256 % 256}.{index % 256}.0/24",
            "podCIDRs": [f"100.{index // 256 % 256}.{index % 256}.0/24"],
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": resources,
            "capacity": resources,
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid4()),
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.8.0-1015-aws",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.37.2",
                "machineID": uuid.uuid4().hex,
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": str(uuid.uuid4()),
            },
        },
    }


NODE_DROP = [
    ("status", "images"),
    ("status", "daemonEndpoints"),
    ("status", "conditions", "*", "lastHeartbeatTime"),
    ("status", "nodeInfo", "bootID"),
    ("status", "nodeInfo", "machineID"),
    ("status", "nodeInfo", "systemUUID"),
    ("spec", "podCIDR"),
    ("spec", "podCIDRs"),
    ("spec", "providerID"),
]
"""What a GPU operator never reads on a Node, beyond the engine's defaults."""
