"""Builders for the objects an operand renders besides RBAC: ConfigMaps (its entrypoint
script among them), the DaemonSet, and the Service and ServiceMonitor of a metrics
exporter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.api import ServiceMonitorConfig
from components.operands._context import Ctx
from components.operands._pods import config_map_volume, mount, tell_host_root


def config_map(
    ctx: Ctx, name: str, data: Mapping[str, str], *, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.meta(name, labels=labels),
        "data": dict(data),
    }


#: Key and mount path of an operand's entrypoint script.
_ENTRYPOINT_KEY = "entrypoint.sh"
_ENTRYPOINT_PATH = "/bin/entrypoint.sh"


def entrypoint_config_map(ctx: Ctx, name: str, script: str, *, app: str) -> dict[str, Any]:
    """The ConfigMap holding an operand's entrypoint script.

    The device plugin and the toolkit start through a script of ours (wait for the driver,
    then exec the image's binary) rather than the image's own entrypoint; the ConfigMap,
    its volume and its mount share `name`.
    """
    return config_map(ctx, name, {_ENTRYPOINT_KEY: script}, labels={"app": app})


def entrypoint_mount(name: str) -> dict[str, Any]:
    """The entrypoint script at `/bin/entrypoint.sh` (subPath: the rest of `/bin` stays)."""
    return mount(name, _ENTRYPOINT_PATH, read_only=True, sub_path=_ENTRYPOINT_KEY)


def entrypoint_volume(name: str) -> dict[str, Any]:
    """The entrypoint ConfigMap as a volume, mode 0700 so the script can be executed."""
    return config_map_volume(name, name, mode=0o700)


def _max_unavailable(value: int | str) -> int | str:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def update_strategy(ctx: Ctx) -> dict[str, Any]:
    daemonsets = ctx.spec.daemonsets
    if daemonsets.update_strategy == "OnDelete":
        return {"type": "OnDelete"}
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {
            "maxUnavailable": _max_unavailable(daemonsets.rolling_update.max_unavailable)
        },
    }


#: Pod labels the user may not override (the DaemonSet selector is immutable).
_RESERVED_POD_LABELS = frozenset({"app", "app.kubernetes.io/part-of"})


def daemonset(
    ctx: Ctx,
    name: str,
    pod: dict[str, Any],
    *,
    app: str | None = None,
    selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    strategy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A DaemonSet whose pods carry `app: <name>` (or `app`; plus `selector`), the
    operator's labels, `daemonsets.labels/annotations` and the operand's own pod
    labels/annotations; `tell_host_root` applied to `pod`."""
    tell_host_root(ctx, pod)
    match = {"app": app or name, **(selector or {})}
    object_labels = {**match, **(labels or {})}
    template_labels: dict[str, str] = {}
    for key, value in {**ctx.spec.daemonsets.labels, **(pod_labels or {})}.items():
        if key not in _RESERVED_POD_LABELS:
            template_labels[key] = value
    template_labels.update(ctx.labels(object_labels))
    annotations = {**ctx.spec.daemonsets.annotations, **(pod_annotations or {})}
    template_meta: dict[str, Any] = {"labels": template_labels}
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": ctx.meta(name, labels=object_labels),
        "spec": {
            "selector": {"matchLabels": match},
            "updateStrategy": dict(strategy) if strategy is not None else update_strategy(ctx),
            "template": {"metadata": template_meta, "spec": pod},
        },
    }


def prometheus_scrape(port: int) -> dict[str, str]:
    """Service annotations for Prometheus setups that discover targets by annotation
    rather than by ServiceMonitor."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}


def service(
    ctx: Ctx,
    name: str,
    *,
    port: int,
    port_name: str,
    selector: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    type_: str = "",
    internal_traffic_policy: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": dict(selector),
        "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        "type": type_ or "ClusterIP",
    }
    if internal_traffic_policy:
        spec["internalTrafficPolicy"] = internal_traffic_policy
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.meta(name, labels={"app": name}, annotations=annotations),
        "spec": spec,
    }


def service_monitor(
    ctx: Ctx,
    app: str,
    endpoint: Mapping[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A prometheus-operator ServiceMonitor for the Service `app` (the metrics exporters';
    the caller checks that the CRD is installed)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": ctx.meta(app, labels={**(labels or {}), "app": app}),
        "spec": {
            "endpoints": [dict(endpoint)],
            "jobLabel": "app",
            "namespaceSelector": {"matchNames": [ctx.namespace]},
            "selector": {"matchLabels": {"app": app}},
        },
    }


def configured_service_monitor(
    ctx: Ctx, app: str, port: str, monitor: ServiceMonitorConfig
) -> dict[str, Any]:
    """`service_monitor` for the Service `app` on `port`, scraped as the policy's monitor
    section asks (interval, timeout, honorLabels, relabelings, extra labels)."""
    endpoint: dict[str, Any] = {"port": port, "path": "/metrics"}
    if monitor.interval:
        endpoint["interval"] = monitor.interval
    if monitor.scrape_timeout:
        endpoint["scrapeTimeout"] = monitor.scrape_timeout
    if monitor.honor_labels:
        endpoint["honorLabels"] = True
    if monitor.relabelings:
        endpoint["relabelings"] = [r.to_dict() for r in monitor.relabelings]
    return service_monitor(ctx, app, endpoint, labels=monitor.additional_labels)
