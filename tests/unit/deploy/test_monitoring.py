"""The alert rules and the dashboard under deployments/monitoring: promtool accepts the rules
and their unit tests pass, and every dashboard query reads a metric that is really exported,
by the operator (its registries, built here) or by DCGM exporter (its default counters)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from components.controllers._node_labels import NAME as NODE_LABEL_CONTROLLER
from components.controllers._nvidiadriver import NAME as NVIDIA_DRIVER_CONTROLLER
from components.controllers.clusterpolicy._controller import NAME as CLUSTER_POLICY_CONTROLLER
from components.metrics import OperatorMetrics
from components.remediation import remediation_metrics_for
from components.run import operator_registry
from components.upgrade._controller import NODE_CONTROLLER, POOL_CONTROLLER
from components.upgrade._metrics import upgrade_metrics_for
from reconciler import metrics_for
from tests.tools import REPO, run

MONITORING = REPO / "deployments" / "monitoring"

# DCGM exporter's default counters (its etc/default-counters.csv), the metrics a stock
# dcgm-exporter serves.
DCGM_EXPORTER = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
}
# Metrics the rules read from elsewhere: Prometheus itself and kube-state-metrics.
SCRAPE_AND_KUBE_STATE = {"up", "kube_daemonset_status_number_unavailable"}

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "le",
}  # fmt: skip
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}


def operator_metrics() -> set[str]:
    """Every sample name the operator's /metrics can serve, from its real registries."""
    registry = operator_registry()
    metrics_for(registry)
    operator = OperatorMetrics(registry)
    upgrade_metrics_for(registry, auto_upgrade_enabled=operator.driver_auto_upgrade_enabled)
    remediation_metrics_for(registry)
    names = set()
    for family in registry.collect():
        names.update(family.name + s for s in SUFFIXES.get(family.type, [""]))
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, labels or keywords)."""
    bare = re.sub(r'"[^"]*"', "", expr)
    bare = re.sub(r"\{[^}]*\}", "", bare)
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", bare)
    bare = re.sub(r"\[[^\]]*\]", "", bare)
    tokens = re.findall(r"\b([a-zA-Z_:][\w:]*)\b\s*(\(?)", bare)
    return {name for name, call in tokens if not call and name not in PROMQL_WORDS}


def test_metric_names_finds_names_only() -> None:
    expr = 'histogram_quantile(0.99, sum by (le, x) (rate(a_bucket{job="y"}[5m]))) / b or c'
    assert metric_names(expr) == {"a_bucket", "b", "c"}


def test_every_dashboard_query_reads_an_exported_metric() -> None:
    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    exported = operator_metrics() | DCGM_EXPORTER
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(queries) >= 15
    read = set()
    for query in queries:
        names = metric_names(query)
        assert names, query
        assert names <= exported, f"{query}: {sorted(names - exported)} is exported by no one"
        read |= names
    # The operator and the GPUs are both on it: reconciles, queue, upgrades, DCGM.
    for wanted in (
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "workqueue_depth",
        "gpu_operator_nodes_upgrades_failed",
        "gpu_operator_reconciliation_status",
        "gpu_operator_remediations_total",
        "DCGM_FI_DEV_GPU_UTIL",
    ):
        assert wanted in read


def rule_groups(tmp_path: Path) -> Path:
    rule = yaml.safe_load((MONITORING / "prometheus-rule.yaml").read_text())
    assert rule["kind"] == "PrometheusRule"
    path = tmp_path / "prometheus-rules.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    return path


def test_rules_pass_promtool_check_and_their_tests(tmp_path: Path) -> None:
    rules = rule_groups(tmp_path)
    run("promtool", "check", "rules", rules)
    shutil.copy(MONITORING / "prometheus-rule.test.yaml", tmp_path)
    run("promtool", "test", "rules", tmp_path / "prometheus-rule.test.yaml")


def test_a_broken_rule_fails_promtool(tmp_path: Path) -> None:
    rules = rule_groups(tmp_path)
    rules.write_text(rules.read_text().replace("== 0", "== == 0", 1))
    assert run("promtool", "check", "rules", rules, check=False).returncode != 0


def test_every_rule_reads_an_exported_metric() -> None:
    rule = yaml.safe_load((MONITORING / "prometheus-rule.yaml").read_text())
    exported = operator_metrics() | DCGM_EXPORTER | SCRAPE_AND_KUBE_STATE
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} >= {
        "GPUOperatorPolicyNotReady",
        "GPUOperatorReconcileErrors",
        "GPUDriverUpgradeFailed",
        "GPUDriverUpgradeHalted",
        "GPUOperandDaemonSetUnavailable",
        "GPURemediationFailed",
    }
    for alert in alerts:
        assert metric_names(alert["expr"]) <= exported, alert["alert"]


def test_the_registry_serves_process_metrics_and_no_created_series() -> None:
    names = operator_metrics()
    assert {"process_resident_memory_bytes", "process_start_time_seconds"} <= names
    assert not [n for n in names if n.endswith("_created")]


def test_controller_label_values_name_real_controllers() -> None:
    """A `controller` matcher in the rules, their tests or the dashboard names one of ours,
    and ours are the reference's names, so its dashboards and runbooks keep matching."""
    ours = {
        CLUSTER_POLICY_CONTROLLER,
        NVIDIA_DRIVER_CONTROLLER,
        NODE_LABEL_CONTROLLER,
        NODE_CONTROLLER,
        POOL_CONTROLLER,
    }
    assert ours >= {
        "clusterpolicy-controller",
        "nvidia-driver-controller",
        "node-labeling-controller",
        "upgrade-controller",
    }
    text = "".join(p.read_text() for p in sorted(MONITORING.iterdir()))
    used = set(re.findall(r'controller=~?"([^"]+)"', text))
    used |= set(re.findall(r"\bcontroller: ([\w-]+)", text))
    assert used
    assert used <= ours
