"""config/manager: the operator's Deployment and metrics Service, as a cluster admin relies
on them (namespace, image, probes, resources, a locked-down container)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cli import build_parser

pytestmark = pytest.mark.unit

MANAGER = Path(__file__).resolve().parents[4] / "config" / "manager"


def documents() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(MANAGER.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            out[doc["kind"]] = doc
    return out


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((MANAGER / "kustomization.yaml").read_text())
    files = {p.name for p in MANAGER.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files


def test_deployment() -> None:
    deployment = documents()["Deployment"]
    assert deployment["metadata"]["namespace"] == "gpu-operator"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "gpu-operator"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"] == "gpu-operator:dev"
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ports[container["readinessProbe"]["httpGet"]["port"]] == 8081
    # The arguments are ones `gpu-operator` accepts, and they match the ports.
    args = build_parser().parse_args(container["args"])
    assert args.handler.__name__ == "run_operator"
    assert args.leader_elect is True
    assert args.metrics_bind_address == f":{ports['metrics']}"
    assert args.health_probe_bind_address == f":{ports['probes']}"
    env = {e["name"]: e for e in container["env"]}
    assert env["OPERATOR_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_metrics_service_selects_the_operator() -> None:
    docs = documents()
    service, deployment = docs["Service"], docs["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in service["spec"]["selector"].items())
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (8080, "metrics")
    assert service["metadata"]["namespace"] == "gpu-operator"
