"""Kubernetes core types a policy carries verbatim into its pods: `PodSecurityContext` and
`NodeAffinity` (core/v1).

They are typed rather than kept free-form so the API server checks them as it checks a pod
(an integer UID, a sysctl with a value) and a typo is refused when it is written, not when a
DaemonSet fails to roll out. Only the fields are modelled; their meaning is the kubelet's.
"""

from __future__ import annotations

from pydantic import Field

from components.api._base import ApiModel
from components.api._common import Int32, Int64


class SELinuxOptions(ApiModel):
    """SELinux labels for the pod's containers."""

    level: str = ""
    role: str = ""
    type: str = ""
    user: str = ""


class SecurityProfile(ApiModel):
    """A seccomp or AppArmor profile: `RuntimeDefault`, `Unconfined` or `Localhost`."""

    type: str
    localhost_profile: str = ""


class Sysctl(ApiModel):
    """A namespaced kernel parameter set for the pod."""

    name: str
    value: str


class WindowsSecurityContextOptions(ApiModel):
    """Windows-only settings (kept for completeness; GPU operands run on Linux)."""

    gmsa_credential_spec: str = ""
    gmsa_credential_spec_name: str = ""
    host_process: bool = False
    run_as_user_name: str = ""


class PodSecurityContext(ApiModel):
    """A core PodSecurityContext, copied as given into the pods it applies to."""

    app_armor_profile: SecurityProfile | None = None
    fs_group: Int64 | None = None
    fs_group_change_policy: str = ""
    run_as_group: Int64 | None = None
    run_as_non_root: bool | None = None
    run_as_user: Int64 | None = None
    se_linux_change_policy: str = ""
    se_linux_options: SELinuxOptions | None = None
    seccomp_profile: SecurityProfile | None = None
    supplemental_groups: list[Int64] = Field(default_factory=list)
    supplemental_groups_policy: str = ""
    sysctls: list[Sysctl] = Field(default_factory=list)
    windows_options: WindowsSecurityContextOptions | None = None


class NodeSelectorRequirement(ApiModel):
    """`key operator values`, e.g. `nvidia.com/gpu.product In [A100]`."""

    key: str
    operator: str
    values: list[str] = Field(default_factory=list)


class NodeSelectorTerm(ApiModel):
    """Requirements that must all hold (node labels and node fields)."""

    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = Field(default_factory=list)


class PreferredSchedulingTerm(ApiModel):
    """A term the scheduler prefers, with its weight (1-100)."""

    preference: NodeSelectorTerm
    weight: Int32


class NodeSelector(ApiModel):
    """Terms of which at least one must hold."""

    node_selector_terms: list[NodeSelectorTerm]


class NodeAffinity(ApiModel):
    """A core NodeAffinity."""

    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list
    )
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
