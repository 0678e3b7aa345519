"""`state-dcgm-exporter`: GPU metrics for Prometheus on port 9400 of each GPU node.

Renders the exporter DaemonSet, the `nvidia-dcgm-exporter` Service (port 9400, named
`gpu-metrics`) and, when the prometheus-operator CRD is installed and
`dcgmExporter.serviceMonitor.enabled`, a `ServiceMonitor` (`monitoring.coreos.com/v1`);
enabled without the CRD gives a condition instead. With `dcgm.enabled` the exporter talks
to the standalone host engine (`nvidia-dcgm:5555`), otherwise it embeds one.

`dcgmExporter.config.name` names the admin's ConfigMap of metrics (a `dcgm-metrics.csv`
key); it is mounted at `/etc/dcgm-exporter/dcgm-metrics.csv` and used instead of the
image's default list.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy, OperandImage
from components.operands._context import (
    DEFAULT_KUBELET_ROOT_DIR,
    BaseOperand,
    Ctx,
    image_or_condition,
)
from components.operands._contract import CONTAINER, Rendered
from components.operands._names import DCGM_APP, DCGM_PORT, deploy_label
from components.operands._pods import (
    apply_component,
    build_pod_spec,
    config_map_volume,
    env,
    env_field,
    get_env,
    host_path,
    merge_env,
    mount,
    pull_policy,
    run_nvidia_volume,
    set_env,
    toolkit_validation,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._workloads import (
    configured_service_monitor,
    daemonset,
    prometheus_scrape,
    service,
)

NAME = "state-dcgm-exporter"
DEPLOY_LABEL = deploy_label("dcgm-exporter")
APP = "nvidia-dcgm-exporter"
ACCOUNT = "nvidia-dcgm-exporter"
PORT = 9400
PORT_NAME = "gpu-metrics"
METRICS_FILE = "dcgm-metrics.csv"
METRICS_PATH = f"/etc/dcgm-exporter/{METRICS_FILE}"
DEFAULT_COLLECTORS = "/etc/dcgm-exporter/dcp-metrics-included.csv"


def _service_monitor(ctx: Ctx) -> dict[str, Any]:
    return configured_service_monitor(ctx, APP, PORT_NAME, ctx.spec.dcgm_exporter.service_monitor)


class DCGMExporter(BaseOperand):
    """The DCGM exporter DaemonSet, ServiceAccount, RBAC, Service and ServiceMonitor."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({CONTAINER})

    def enabled(self, policy: ClusterPolicy) -> bool:
        return policy.spec.dcgm_exporter.enabled

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec
        exporter = spec.dcgm_exporter
        rendered = Rendered(
            objects=[
                *account_and_rbac(
                    ctx,
                    ACCOUNT,
                    # A metrics list named by DCGM_EXPORTER_CONFIGMAP_DATA (`-m ns:name`) is
                    # read through the API, as on the reference, from this namespace.
                    rules=[rule([""], ["configmaps"], ["get", "list"])],
                    # The pods its GPUs serve (pod labels), in any namespace.
                    cluster_rules=[rule([""], ["pods"], ["get", "list", "watch"])],
                    cluster_role_name="nvidia-dcgm-exporter-read-pods",
                ),
                service(
                    ctx,
                    APP,
                    port=PORT,
                    port_name=PORT_NAME,
                    selector={"app": APP},
                    annotations=prometheus_scrape(PORT),
                    type_=exporter.service.type,
                    internal_traffic_policy=exporter.service.internal_traffic_policy,
                ),
            ]
        )
        if exporter.service_monitor.enabled:
            if ctx.view.has_service_monitor_crd:
                rendered.objects.append(_service_monitor(ctx))
            else:
                rendered.conditions.append(
                    (
                        "ServiceMonitorCRDMissing",
                        "dcgmExporter.serviceMonitor.enabled is true but the ServiceMonitor "
                        "CRD (servicemonitors.monitoring.coreos.com) is not installed",
                    )
                )
        image = image_or_condition(ctx, OperandImage.DCGM_EXPORTER, rendered)
        if image is None:
            return rendered

        envs = [
            env("DCGM_EXPORTER_LISTEN", f":{PORT}"),
            env("DCGM_EXPORTER_KUBERNETES", "true"),
            env("DCGM_EXPORTER_COLLECTORS", DEFAULT_COLLECTORS),
            env_field("NODE_NAME", "spec.nodeName"),
        ]
        mounts = [
            mount("pod-gpu-resources", f"{DEFAULT_KUBELET_ROOT_DIR}/pod-resources", read_only=True),
        ]
        volumes = [
            host_path("pod-gpu-resources", ctx.kubelet_host_dir("pod-resources")),
            run_nvidia_volume(kind=""),
        ]
        if spec.dcgm.enabled:
            envs.append(env("DCGM_REMOTE_HOSTENGINE_INFO", f"{DCGM_APP}:{DCGM_PORT}"))
        if exporter.config.name:
            set_env(envs, "DCGM_EXPORTER_COLLECTORS", METRICS_PATH)
            mounts.append(
                mount("metrics-config", METRICS_PATH, read_only=True, sub_path=METRICS_FILE)
            )
            volumes.append(
                config_map_volume("metrics-config", exporter.config.name, items=[METRICS_FILE])
            )
        if exporter.hpc_job_mapping.enabled:
            directory = exporter.hpc_job_mapping.directory
            envs.append(env("DCGM_HPC_JOB_MAPPING_DIR", directory))
            mounts.append(mount("hpc-job-mapping", directory, read_only=True))
            volumes.append(host_path("hpc-job-mapping", directory, "DirectoryOrCreate"))
        envs = merge_env(envs, exporter.env)
        container = apply_component(
            {
                "name": "nvidia-dcgm-exporter",
                "image": image,
                "imagePullPolicy": pull_policy(exporter),
                "env": envs,
                "ports": [{"name": "metrics", "containerPort": PORT}],
                "securityContext": {"privileged": True},
                "volumeMounts": mounts,
            },
            exporter,
        )
        pod = build_pod_spec(
            ctx,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=[toolkit_validation(ctx, whole_run_nvidia=True)],
            containers=[container],
            volumes=volumes,
            images=[exporter],
            runtime_class=True,
            host_pid=exporter.host_pid,
        )
        remote = get_env(envs, "DCGM_REMOTE_HOSTENGINE_INFO") or ""
        if exporter.host_network or (not spec.dcgm.enabled and remote.startswith("localhost")):
            pod["hostNetwork"] = True
            pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        rendered.objects.append(
            daemonset(
                ctx,
                APP,
                pod,
                pod_labels=exporter.pod_labels,
                pod_annotations={
                    **exporter.pod_annotations,
                    **ctx.management_annotations("nvidia-dcgm-exporter"),
                },
            )
        )
        return rendered
