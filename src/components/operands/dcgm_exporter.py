"""`state-dcgm-exporter`: GPU metrics for Prometheus on port 9400 of each GPU node.

Renders the exporter DaemonSet, the `nvidia-dcgm-exporter` Service (port 9400, named
`gpu-metrics`) and, when the prometheus-operator CRD is installed and
`dcgmExporter.serviceMonitor.enabled`, a `ServiceMonitor` (`monitoring.coreos.com/v1`);
enabled without the CRD gives a condition instead. With `dcgm.enabled` the exporter talks
to the standalone host engine (`nvidia-dcgm:5555`), otherwise it embeds one.

`dcgmExporter.config.name` names the admin's ConfigMap of metrics (a `dcgm-metrics.csv`
key); it is mounted at `/etc/dcgm-exporter/dcgm-metrics.csv` and used instead of the
image's default list.

Under a GPUCluster the pods claim all of their node's GPUs with admin access (the
ResourceClaimTemplate `nvidia-dcgm-exporter-gpus`) instead of naming the `nvidia`
RuntimeClass and waiting for the toolkit, neither of which the DRA stack has.
"""

from __future__ import annotations

from typing import Any

from components.api import OperandImage
from components.operands._context import DEFAULT_KUBELET_ROOT_DIR, Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._dra import all_gpus_template, claim_gpus, on_dra_stack
from components.operands._names import DCGM_APP, DCGM_PORT
from components.operands._pods import (
    config_map_volume,
    env,
    env_field,
    get_env,
    host_path,
    merge_env,
    mount,
    run_nvidia_volume,
    set_env,
    toolkit_validation,
)
from components.operands._rbac import rule
from components.operands._workloads import configured_service_monitor, prometheus_scrape, service

PORT = 9400
PORT_NAME = "gpu-metrics"
METRICS_FILE = "dcgm-metrics.csv"
METRICS_PATH = f"/etc/dcgm-exporter/{METRICS_FILE}"
DEFAULT_COLLECTORS = "/etc/dcgm-exporter/dcp-metrics-included.csv"
#: Under a GPUCluster: the template of its pods' claim on their node's GPUs.
GPU_TEMPLATE = "nvidia-dcgm-exporter-gpus"
GPU_CLAIM = "gpus"


class DCGMExporter(DeclaredOperand):
    """The DCGM exporter DaemonSet, ServiceAccount, RBAC, Service and ServiceMonitor."""

    key = "dcgm-exporter"
    workloads = frozenset({CONTAINER})
    image = OperandImage.DCGM_EXPORTER
    # A metrics list named by DCGM_EXPORTER_CONFIGMAP_DATA (`-m ns:name`) is read through
    # the API, as on the reference, from this namespace.
    rules = (rule([""], ["configmaps"], ["get", "list"]),)
    # The pods its GPUs serve (pod labels), in any namespace.
    cluster_rules = (rule([""], ["pods"], ["get", "list", "watch"]),)
    cluster_role_name = "nvidia-dcgm-exporter-read-pods"

    def services(self, ctx: Ctx, rendered: Rendered) -> list[dict[str, Any]]:
        """Its Service as `dcgmExporter.service` shapes it; the ServiceMonitor as
        `dcgmExporter.serviceMonitor` asks, or a condition when its CRD is missing."""
        exporter = ctx.spec.dcgm_exporter
        objects = [
            service(
                ctx,
                self.app,
                port=PORT,
                port_name=PORT_NAME,
                selector={"app": self.app},
                annotations=prometheus_scrape(PORT),
                type_=exporter.service.type,
                internal_traffic_policy=exporter.service.internal_traffic_policy,
            )
        ]
        if not exporter.service_monitor.enabled:
            return objects
        if ctx.view.has_service_monitor_crd:
            objects.append(
                configured_service_monitor(ctx, self.app, PORT_NAME, exporter.service_monitor)
            )
        else:
            rendered.conditions.append(
                (
                    "ServiceMonitorCRDMissing",
                    "dcgmExporter.serviceMonitor.enabled is true but the ServiceMonitor "
                    "CRD (servicemonitors.monitoring.coreos.com) is not installed",
                )
            )
        return objects

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        spec = ctx.spec
        exporter = spec.dcgm_exporter
        envs = [
            env("DCGM_EXPORTER_LISTEN", f":{PORT}"),
            env("DCGM_EXPORTER_KUBERNETES", "true"),
            env("DCGM_EXPORTER_COLLECTORS", DEFAULT_COLLECTORS),
            env_field("NODE_NAME", "spec.nodeName"),
        ]
        if spec.dcgm.enabled:
            envs.append(env("DCGM_REMOTE_HOSTENGINE_INFO", f"{DCGM_APP}:{DCGM_PORT}"))
        mounts, volumes = _metrics_sources(ctx, envs)
        main = {
            "name": "nvidia-dcgm-exporter",
            "ports": [{"name": "metrics", "containerPort": PORT}],
            "securityContext": {"privileged": True},
            "volumeMounts": mounts,
        }
        # An embedded host engine the user points at localhost is reached on the host.
        remote = get_env(merge_env(envs, exporter.env), "DCGM_REMOTE_HOSTENGINE_INFO") or ""
        embedded_local = not spec.dcgm.enabled and remote.startswith("localhost")
        dra = on_dra_stack(ctx.policy)

        def claim(pod: dict[str, Any], container: dict[str, Any]) -> None:
            claim_gpus(pod, container, GPU_TEMPLATE, GPU_CLAIM)

        pod = Pod(
            main,
            volumes,
            env=envs,
            init_containers=[] if dra else [toolkit_validation(ctx, whole_run_nvidia=True)],
            runtime_class=not dra,
            finish=claim if dra else None,
            host_pid=exporter.host_pid,
            host_network=exporter.host_network or embedded_local,
            pod_labels=exporter.pod_labels,
            pod_annotations=exporter.pod_annotations,
        )
        if dra:
            return [
                all_gpus_template(ctx, GPU_TEMPLATE, GPU_CLAIM),
                self.daemonset(ctx, image, pod),
            ]
        return [self.daemonset(ctx, image, pod)]


def _metrics_sources(
    ctx: Ctx, envs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The kubelet's pod resources, the user's metrics list and the HPC job mapping: the
    mounts and volumes, and their env (in place)."""
    exporter = ctx.spec.dcgm_exporter
    mounts = [
        mount("pod-gpu-resources", f"{DEFAULT_KUBELET_ROOT_DIR}/pod-resources", read_only=True),
    ]
    volumes = [
        host_path("pod-gpu-resources", ctx.kubelet_host_dir("pod-resources")),
        run_nvidia_volume(kind=""),
    ]
    if exporter.config.name:
        set_env(envs, "DCGM_EXPORTER_COLLECTORS", METRICS_PATH)
        mounts.append(mount("metrics-config", METRICS_PATH, read_only=True, sub_path=METRICS_FILE))
        volumes.append(
            config_map_volume("metrics-config", exporter.config.name, items=[METRICS_FILE])
        )
    if exporter.hpc_job_mapping.enabled:
        directory = exporter.hpc_job_mapping.directory
        envs.append(env("DCGM_HPC_JOB_MAPPING_DIR", directory))
        mounts.append(mount("hpc-job-mapping", directory, read_only=True))
        volumes.append(host_path("hpc-job-mapping", directory, "DirectoryOrCreate"))
    return mounts, volumes
