"""The Prometheus operator's ServiceMonitor CRD, schemaless: installed on test clusters
where an operator should create ServiceMonitors (it creates them only once the CRD exists)."""

from __future__ import annotations

from typing import Any

SERVICE_MONITOR_CRD_NAME = "servicemonitors.monitoring.coreos.com"
SERVICE_MONITOR_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": SERVICE_MONITOR_CRD_NAME},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {
            "kind": "ServiceMonitor",
            "listKind": "ServiceMonitorList",
            "plural": "servicemonitors",
            "singular": "servicemonitor",
        },
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
