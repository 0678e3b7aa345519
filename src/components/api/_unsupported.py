"""Fields the API accepts (as the reference's does) that no operand acts on yet.

The one list of them: the ClusterPolicy controller puts an `Unsupported` condition on the
policy naming each one that is set, and `gpu-operator validate` warns about the same ones
offline. A field leaves this list in the commit that makes an operand act on it.

A field is named only when it asks for something (`enabled: true`, a non-default path, a
non-empty list); `enabled: false` or the default value needs no action, so it is silent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from components.api._base import ApiModel
from components.api._clusterpolicy import ClusterPolicySpec
from components.api._nvidiadriver import NVIDIADriverSpec

#: The condition type on the ClusterPolicy, and its reason.
UNSUPPORTED_CONDITION = "Unsupported"
UNSUPPORTED_REASON = "AcceptedNotActedOn"


@dataclass(frozen=True)
class _Rule:
    path: str
    #: What the value asks for, as written after the path (`=true`, `=/x`, or `` for a
    #: section); None when it asks for nothing.
    asks: Callable[[Any], str | None]


def _true(get: Callable[[Any], bool]) -> Callable[[Any], str | None]:
    return lambda spec: "=true" if get(spec) else None


def _given(get: Callable[[Any], Any]) -> Callable[[Any], str | None]:
    """Set to something non-empty (a list, a map, a section)."""

    def asks(spec: Any) -> str | None:
        value = get(spec)
        if isinstance(value, ApiModel):
            value = value.to_dict()
        return "" if value else None

    return asks


CLUSTER_POLICY_RULES: tuple[_Rule, ...] = (
    _Rule("spec.psp.enabled", _true(lambda s: s.psp.enabled)),
    _Rule("spec.dcgmExporter.annotations", _given(lambda s: s.dcgm_exporter.annotations)),
    _Rule("spec.dcgmExporter.enablePodLabels", _true(lambda s: s.dcgm_exporter.enable_pod_labels)),
    _Rule("spec.dcgmExporter.enablePodUID", _true(lambda s: s.dcgm_exporter.enable_pod_uid)),
    _Rule(
        "spec.dcgmExporter.podLabelAllowlistRegex",
        _given(lambda s: s.dcgm_exporter.pod_label_allowlist_regex),
    ),
)

NVIDIA_DRIVER_RULES: tuple[_Rule, ...] = (
    _Rule("spec.nodeAffinity", _given(lambda s: s.node_affinity)),
    _Rule("spec.gds.enabled", _true(lambda s: s.gds.enabled)),
    _Rule("spec.gdrcopy.enabled", _true(lambda s: s.gdrcopy.enabled)),
)


def _named(rules: Sequence[_Rule], spec: Any) -> list[str]:
    return [rule.path + asked for rule in rules if (asked := rule.asks(spec)) is not None]


def unsupported_fields(spec: ClusterPolicySpec | NVIDIADriverSpec) -> list[str]:
    """`spec.gds.enabled=true`, ...: the fields set in `spec` that nothing acts on yet."""
    if isinstance(spec, NVIDIADriverSpec):
        return _named(NVIDIA_DRIVER_RULES, spec)
    return _named(CLUSTER_POLICY_RULES, spec)


def not_acted_on(field: str) -> str:
    return f"{field} is accepted but not acted on"


def unsupported_message(fields: Sequence[str]) -> str:
    """The condition's message: every field, in the list's order."""
    return "; ".join(not_acted_on(f) for f in fields)
