"""`GPUCluster` (`nvidia.com/v1alpha1`, cluster-scoped): the GPU stack on Dynamic Resource
Allocation, where pods claim GPUs through ResourceClaims instead of `nvidia.com/gpu`.

It is the third kind the reference serves (its 26.7 release). The fields follow its CRD so a
manifest written for the reference reads here unchanged. What differs from a ClusterPolicy:
no driver, toolkit or device plugin sections (the driver comes from the host or an
NVIDIADriver), and a `draDriver` section for NVIDIA's DRA driver instead.

The GPUCluster controller (`components.controllers.gpucluster`) renders its stack from
`dra_stack`: a ClusterPolicy whose spec also carries the `draDriver` section, so that the
DCGM and DCGM exporter operands render from it as they do from a ClusterPolicy, and the DRA
operands find their own section.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from components.api._base import ApiModel, Cel, crd_default
from components.api._clusterpolicy import (
    ClusterPolicy,
    ClusterPolicySpec,
    DaemonsetsSpec,
    DCGMExporterSpec,
    DCGMSpec,
    DevicePluginSpec,
    GPUFeatureDiscoverySpec,
    HostPathsSpec,
    ToolkitSpec,
)
from components.api._common import EnvVar, Int32, ObjectMeta, ResourceRequirements
from components.api._driver import DriverSpec
from components.api._status import _StatusCore
from reconciler import name_of

GPU_CLUSTER_API_VERSION = "nvidia.com/v1alpha1"
#: The one name a GPUCluster may have: there is at most one per cluster.
GPU_CLUSTER_NAME = "gpu-cluster"
GPUClusterState = Literal["ready", "notReady", "disabled"]
#: The finalizer a GPUCluster carries while it may still have to wait for the claims on its
#: devices (the reference's name).
GPU_CLUSTER_FINALIZER = "gpucluster.nvidia.com/dra-resourceclaim"
#: The DRA driver name under which NVIDIA's GPUs are published and allocated.
GPU_DRA_DRIVER = "gpu.nvidia.com"
#: The DRA driver's image name: name characters only, no registry or tag.
_DRA_IMAGE_PATTERN = r"^[a-zA-Z0-9\-]+$"


def _named_gpu_cluster(document: dict[str, Any]) -> bool:
    return name_of(document) == GPU_CLUSTER_NAME


#: Object-level rule: a second GPUCluster cannot exist, because the name is fixed.
GPU_CLUSTER_SINGLETON = Cel(
    rule=f"self.metadata.name == '{GPU_CLUSTER_NAME}'",
    message=f"only one GPUCluster per cluster: its metadata.name must be {GPU_CLUSTER_NAME}",
    check=_named_gpu_cluster,
)


class DRAHealthcheckSpec(ApiModel):
    """The kubelet-plugin container's gRPC health service and the probes that use it."""

    enabled: bool = crd_default(True, description="Serve the health service and probe it.")
    port: Int32 | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Health service port (the gpus and computeDomains containers differ).",
    )


class DRAKubeletPluginSpec(ApiModel):
    """One container of the DRA kubelet-plugin DaemonSet."""

    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")
    healthcheck: DRAHealthcheckSpec | None = Field(
        default=None, description="The container's health service and probes."
    )
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements, description="The container's requests and limits."
    )


class DRAControllerSpec(ApiModel):
    """The compute-domain controller Deployment."""

    env: list[EnvVar] = Field(default_factory=list, description="Extra environment variables.")
    resources: ResourceRequirements = Field(
        default_factory=ResourceRequirements, description="The container's requests and limits."
    )


class DRAGPUsSpec(ApiModel):
    """The `gpu.nvidia.com` side of the driver: GPUs published as ResourceSlices."""

    kubelet_plugin: DRAKubeletPluginSpec = Field(default_factory=DRAKubeletPluginSpec)


class DRAComputeDomainsSpec(ApiModel):
    """Compute domains (multi-node NVLink): their controller and kubelet-plugin container."""

    enabled: bool = crd_default(True, description="Run the compute-domain side of the driver.")
    controller: DRAControllerSpec = Field(default_factory=DRAControllerSpec)
    kubelet_plugin: DRAKubeletPluginSpec = Field(default_factory=DRAKubeletPluginSpec)


class DRADriverSpec(ApiModel):
    """NVIDIA's DRA driver: its image and each of its two capabilities."""

    repository: str = Field(default="", description="Image repository of the DRA driver.")
    image: str = Field(
        default="", pattern=_DRA_IMAGE_PATTERN, description="Image name of the DRA driver."
    )
    version: str = Field(default="", description="Image tag of the DRA driver.")
    image_pull_policy: str = Field(default="", description="Image pull policy.")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Image pull secrets.")
    feature_gates: dict[str, bool] = Field(
        default_factory=dict,
        description="Feature gates of the DRA driver, on or off by name (its FEATURE_GATES).",
    )
    gpus: DRAGPUsSpec = Field(default_factory=DRAGPUsSpec)
    compute_domains: DRAComputeDomainsSpec = Field(default_factory=DRAComputeDomainsSpec)


class GPUClusterSpec(ApiModel):
    """The DRA stack: the DRA driver, DCGM and its exporter, and what their pods share."""

    dra_driver: DRADriverSpec = Field(description="NVIDIA's DRA driver.")
    daemonsets: DaemonsetsSpec = Field(default_factory=DaemonsetsSpec)
    dcgm: DCGMSpec = Field(default_factory=DCGMSpec)
    dcgm_exporter: DCGMExporterSpec = Field(default_factory=DCGMExporterSpec)
    host_paths: HostPathsSpec = Field(default_factory=HostPathsSpec)


class GPUClusterStatus(_StatusCore):
    """Observed state of the GPUCluster: the reference's fields (state, namespace,
    conditions) and the generation they speak of. No per-operand list and no driver
    upgrade: the Ready condition names what is not ready, and the driver's upgrade is its
    NVIDIADriver's."""

    state: GPUClusterState = Field(description="ready, notReady, or disabled.")


class GPUCluster(ApiModel):
    """The GPUCluster: the DRA-based GPU stack of the whole cluster (at most one)."""

    cel_rules: ClassVar[tuple[Cel, ...]] = (GPU_CLUSTER_SINGLETON,)

    api_version: Literal["nvidia.com/v1alpha1"] = "nvidia.com/v1alpha1"
    kind: Literal["GPUCluster"] = "GPUCluster"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: GPUClusterSpec = Field(default_factory=lambda: GPUClusterSpec(dra_driver=DRADriverSpec()))
    status: GPUClusterStatus | None = None


class DRAStackSpec(ClusterPolicySpec):
    """A ClusterPolicy's spec with the GPUCluster's `draDriver` section (`dra_stack`)."""

    dra_driver: DRADriverSpec = Field(default_factory=DRADriverSpec)


class DRAStack(ClusterPolicy):
    """What the GPUCluster's operands render from (`dra_stack`)."""

    spec: DRAStackSpec = Field(default_factory=DRAStackSpec)


def dra_stack(cluster: GPUCluster) -> DRAStack:
    """The GPUCluster as a policy its operands render from: its own sections (the DRA
    driver, DCGM, the exporter, host paths, what every DaemonSet shares) and nothing of
    the device-plugin stack (no driver, toolkit, device plugin or GFD of the policy's: the
    driver is an NVIDIADriver's or the host's)."""
    spec = cluster.spec
    stack = DRAStackSpec(
        dra_driver=spec.dra_driver,
        daemonsets=spec.daemonsets,
        dcgm=spec.dcgm,
        dcgm_exporter=spec.dcgm_exporter,
        host_paths=spec.host_paths,
        driver=DriverSpec(enabled=False),
        toolkit=ToolkitSpec(enabled=False),
        device_plugin=DevicePluginSpec(enabled=False),
        gfd=GPUFeatureDiscoverySpec(enabled=False),
    )
    return DRAStack(metadata=cluster.metadata, spec=stack)


__all__ = [
    "GPU_CLUSTER_API_VERSION",
    "GPU_CLUSTER_FINALIZER",
    "GPU_CLUSTER_NAME",
    "GPU_CLUSTER_SINGLETON",
    "GPU_DRA_DRIVER",
    "DRAComputeDomainsSpec",
    "DRAControllerSpec",
    "DRADriverSpec",
    "DRAGPUsSpec",
    "DRAHealthcheckSpec",
    "DRAKubeletPluginSpec",
    "DRAStack",
    "DRAStackSpec",
    "GPUCluster",
    "GPUClusterSpec",
    "GPUClusterState",
    "GPUClusterStatus",
    "dra_stack",
]
