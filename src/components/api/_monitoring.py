"""prometheus-operator ServiceMonitor settings, shared by the operator's own metrics
(`operator.metrics.serviceMonitor`) and DCGM exporter's (`dcgmExporter.serviceMonitor`).

Durations and relabeling actions use prometheus-operator's own syntax, so what an admin
copies from a ServiceMonitor they already have is accepted as it is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.api._base import ApiModel, crd_default
from components.api._common import Int64, StringMap

#: prometheus-operator's Duration (`30s`, `1m30s`, `0`).
DURATION_PATTERN = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
    r"(([0-9]+)ms)?)$"
)

RelabelAction = Literal[
    "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
    "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
    "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
    "dropequal", "DropEqual",
]  # fmt: skip


class RelabelConfig(ApiModel):
    """A Prometheus relabeling rule."""

    source_labels: list[str] = Field(default_factory=list)
    separator: str = ""
    target_label: str = ""
    regex: str = ""
    modulus: Int64 | None = Field(default=None, ge=0)
    replacement: str = ""
    action: RelabelAction = crd_default("replace")


class ServiceMonitorConfig(ApiModel):
    """A prometheus-operator ServiceMonitor for a metrics endpoint."""

    enabled: bool = Field(default=False, description="Create the ServiceMonitor.")
    interval: str = Field(
        default="",
        pattern=DURATION_PATTERN,
        description="Scrape interval (e.g. 15s); empty uses Prometheus' global one.",
    )
    scrape_timeout: str = Field(
        default="",
        pattern=DURATION_PATTERN,
        description="Scrape timeout (e.g. 10s); empty uses Prometheus' global one.",
    )
    honor_labels: bool = False
    additional_labels: StringMap = Field(default_factory=dict)
    relabelings: list[RelabelConfig] = Field(default_factory=list)


class OperatorMetricsSpec(ApiModel):
    """How the operator's own metrics are scraped."""

    service_monitor: ServiceMonitorConfig = Field(default_factory=ServiceMonitorConfig)
