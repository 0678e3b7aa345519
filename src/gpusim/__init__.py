"""A simulated GPU cluster on one machine: `gpu-operator sim up|down`, `gpu-operator demo`
and the Python API the tests and benchmarks use.

A real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) runs
kwok-simulated nodes; what NVIDIA's node software does on a GPU node is simulated by
`gpusim.gpu_node_behaviour`, a small controller on our own engine (`reconciler`).

The operator never imports this package (an import-linter contract says so) and its image
does not carry it: the `sim` and `demo` subcommands import it by name when they run.

In tests::

    with SimulatedCluster(ClusterConfig(gpu_nodes=3, cpu_nodes=1)) as sim:
        ...  # sim.kubeconfig, sim.gpu_nodes, await sim.add_node(sim.gpu_node_spec("new"))
"""

from __future__ import annotations

from gpusim._binaries import KWOK_VERSION, REGISTRY_VERSION, SimBinaries
from gpusim._cluster import SimulatedCluster
from gpusim._components import KCM_CONTROLLERS
from gpusim._crds import apply_crds, load_documents
from gpusim._dra_stack import DEPLOY_LABEL as DRA_DEPLOY_LABEL
from gpusim._dra_stack import DRIVER as DRA_DRIVER
from gpusim._dra_stack import NAMESPACE as DRA_NAMESPACE
from gpusim._dra_stack import PLUGIN_ACCOUNT as DRA_PLUGIN_ACCOUNT
from gpusim._dra_stack import PLUGIN_APP as DRA_PLUGIN_APP
from gpusim._dra_stack import POLICY as DRA_POLICY
from gpusim._dra_stack import VALIDATOR_APP as DRA_VALIDATOR_APP
from gpusim._errors import SimAlreadyRunningError, SimError
from gpusim._failing_drivers import (
    ANNOTATION_FAILING_DRIVERS,
    failing_versions,
    mark_failing_drivers,
)
from gpusim._hardware import (
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
from gpusim._node_software import ANNOTATION_MIG_APPLIED
from gpusim._nodes import (
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
from gpusim._nvidia_operator import (
    IMAGE_ENVS,
    ReferenceUnavailable,
    build_reference,
    reference_command,
    reference_env,
    reference_policy,
    sim_images,
    start_reference,
    stop_reference,
)
from gpusim._reference import (
    REFERENCE_DRIVER_DAEMONSET,
    ReferenceDaemonSet,
    ReferenceInstall,
    reference_daemonsets,
    reference_install,
)
from gpusim._registry import SimulatedRegistry
from gpusim._sickness import (
    ANNOTATION_ECC,
    ANNOTATION_RESET_FAILS,
    error_patch,
    inject_gpu_error,
    sick_gpus,
)
from gpusim._state import state_dir

__all__ = [
    "ANNOTATION_ECC",
    "ANNOTATION_FAILING_DRIVERS",
    "ANNOTATION_GPUS",
    "ANNOTATION_HOST_DRIVER",
    "ANNOTATION_MIG_APPLIED",
    "ANNOTATION_MIG_CAPABLE",
    "ANNOTATION_PRODUCT",
    "ANNOTATION_RESET_FAILS",
    "DEFAULT_CONTAINER_RUNTIME",
    "DEFAULT_PRODUCT",
    "DRA_DEPLOY_LABEL",
    "DRA_DRIVER",
    "DRA_NAMESPACE",
    "DRA_PLUGIN_ACCOUNT",
    "DRA_PLUGIN_APP",
    "DRA_POLICY",
    "DRA_VALIDATOR_APP",
    "IMAGE_ENVS",
    "KCM_CONTROLLERS",
    "KWOK_ANNOTATION",
    "KWOK_VERSION",
    "LABEL_KERNEL",
    "LABEL_OS_ID",
    "LABEL_OS_VERSION",
    "LABEL_PCI_NVIDIA",
    "MIG_BALANCED",
    "MIG_PROFILES",
    "PRODUCTS",
    "REFERENCE_DRIVER_DAEMONSET",
    "REGISTRY_VERSION",
    "ClusterConfig",
    "GpuProduct",
    "MigConfigError",
    "MigProfile",
    "NodeSpec",
    "OsRelease",
    "ReferenceDaemonSet",
    "ReferenceInstall",
    "ReferenceUnavailable",
    "SimAlreadyRunningError",
    "SimBinaries",
    "SimError",
    "SimulatedCluster",
    "SimulatedRegistry",
    "apply_crds",
    "build_reference",
    "cpu_node",
    "error_patch",
    "failing_versions",
    "gpu_node",
    "inject_gpu_error",
    "kernel_labels",
    "load_documents",
    "mark_failing_drivers",
    "mig_layout",
    "node_labels",
    "node_manifest",
    "parse_kernels",
    "parse_os",
    "parse_os_list",
    "product",
    "reference_command",
    "reference_daemonsets",
    "reference_env",
    "reference_install",
    "reference_policy",
    "sick_gpus",
    "sim_images",
    "start_reference",
    "state_dir",
    "stop_reference",
]
