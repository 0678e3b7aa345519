"""A simulated GPU cluster on one machine: `gpu-operator sim up|down` and its Python API.

A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) runs
kwok-simulated nodes; what NVIDIA's node software does on a GPU node is simulated in one
module, `components.sim.gpu_node_behaviour`.

In tests::

    with SimulatedCluster(ClusterConfig(gpu_nodes=3, cpu_nodes=1)) as sim:
        ...  # sim.kubeconfig, sim.gpu_nodes, await sim.add_node(sim.gpu_node_spec("new"))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from components.sim._errors import SimAlreadyRunningError, SimError
from components.sim._hardware import (
    DEFAULT_PRODUCT,
    MIG_BALANCED,
    MIG_PROFILES,
    PRODUCTS,
    GpuProduct,
    MigConfigError,
    MigProfile,
    mig_layout,
    product,
)
from components.sim._nodes import (
    ANNOTATION_GPUS,
    ANNOTATION_HOST_DRIVER,
    ANNOTATION_MIG_CAPABLE,
    ANNOTATION_PRODUCT,
    DEFAULT_CONTAINER_RUNTIME,
    KWOK_ANNOTATION,
    LABEL_KERNEL,
    LABEL_OS_ID,
    LABEL_OS_VERSION,
    LABEL_PCI_NVIDIA,
    ClusterConfig,
    NodeSpec,
    OsRelease,
    cpu_node,
    gpu_node,
    kernel_labels,
    node_labels,
    node_manifest,
    parse_kernels,
    parse_os,
    parse_os_list,
)

# These bring in the cluster machinery (reconciler, kubernetes_asyncio), so they are
# imported on first use: the `gpu-operator` command line reads the hardware and node
# defaults above on every start, and starts fast.
if TYPE_CHECKING:
    from components.sim._cluster import KCM_CONTROLLERS, SimulatedCluster
    from components.sim._state import state_dir
else:
    _LAZY = {
        "KCM_CONTROLLERS": "components.sim._cluster",
        "SimulatedCluster": "components.sim._cluster",
        "state_dir": "components.sim._state",
    }

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


__all__ = [
    "ANNOTATION_GPUS",
    "ANNOTATION_HOST_DRIVER",
    "ANNOTATION_MIG_CAPABLE",
    "ANNOTATION_PRODUCT",
    "DEFAULT_CONTAINER_RUNTIME",
    "DEFAULT_PRODUCT",
    "KCM_CONTROLLERS",
    "KWOK_ANNOTATION",
    "LABEL_KERNEL",
    "LABEL_OS_ID",
    "LABEL_OS_VERSION",
    "LABEL_PCI_NVIDIA",
    "MIG_BALANCED",
    "MIG_PROFILES",
    "PRODUCTS",
    "ClusterConfig",
    "GpuProduct",
    "MigConfigError",
    "MigProfile",
    "NodeSpec",
    "OsRelease",
    "SimAlreadyRunningError",
    "SimError",
    "SimulatedCluster",
    "cpu_node",
    "gpu_node",
    "kernel_labels",
    "mig_layout",
    "node_labels",
    "node_manifest",
    "parse_kernels",
    "parse_os",
    "parse_os_list",
    "product",
    "state_dir",
]
