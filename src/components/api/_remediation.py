"""GPU remediation (`ClusterPolicy.spec.remediation`, ours: the reference has none) and the
names it writes on a Node.

When the node agent says a GPU is sick (`GPUHealthy=False` for a listed reason), the
operator fences the node, clears its GPU pods, asks the agent to reset the GPU, waits for
it to validate again, and lets the node back in. Every step is a label on the node, so a
restarted operator carries on where the cluster says it was; the agent answers through
annotations, so neither side calls the other.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field

from components.api._base import ApiModel
from components.api._common import Int32
from components.api._upgrade import IntOrPercent

PREFIX: Final = "nvidia.com/gpu-remediation"

REMEDIATION_TAINT: Final = PREFIX
"""The NoSchedule taint that fences a node while its GPU is remediated (or failed)."""
REMEDIATION_STATE_LABEL: Final = PREFIX + ".state"
"""The step the node is at: see `RemediationState`."""
REMEDIATION_REASON_ANNOTATION: Final = PREFIX + ".reason"
"""What started it: `XID 79 on GPU 1 (GPU-...)`, the agent's message."""
REMEDIATION_GPU_ANNOTATION: Final = PREFIX + ".gpu"
"""The index of the sick GPU (what the reset names)."""
REMEDIATION_XID_ANNOTATION: Final = PREFIX + ".xid"
"""The XID, or `ECC` for an ECC threshold."""
REMEDIATION_SINCE_ANNOTATION: Final = PREFIX + ".since"
"""When the current step began (RFC 3339): how long a step has waited."""
REMEDIATION_HISTORY_ANNOTATION: Final = PREFIX + ".history"
"""Start times of the node's remediations (RFC 3339, comma-separated), within the window."""
REMEDIATION_APPROVED_ANNOTATION: Final = PREFIX + ".approved"
"""`true`, set by an admin: a remediation the policy holds for approval may go on."""
RESET_REQUEST_ANNOTATION: Final = PREFIX + ".reset-request"
"""Written by the operator, read by the node agent: `<gpu index>/<request id>`."""
RESET_RESULT_ANNOTATION: Final = PREFIX + ".reset-result"
"""Written by the node agent: `<request id>/succeeded`, `<request id>/failed/<why>`, or
`<request id>/waiting/<why>` while a process still holds the GPU."""
REBOOT_REQUEST_ANNOTATION: Final = PREFIX + ".reboot-request"
"""Written by the operator: `<request id>`; the agent writes the host's reboot sentinel
(`/var/run/reboot-required`, what kured watches) and answers in `REBOOT_RESULT_ANNOTATION`."""
REBOOT_RESULT_ANNOTATION: Final = PREFIX + ".reboot-result"
"""Written by the node agent: `<request id>/written` or `<request id>/failed/<why>`."""
REMEDIATION_FAILED_CONDITION: Final = "GPURemediationFailed"
"""A Node condition: True while a node stays fenced because its GPU did not recover."""
REBOOT_SENTINEL: Final = "var/run/reboot-required"
"""Under the host's root: the file kured (and unattended-upgrades) reads as "reboot me"."""

AGENT_REQUEST_ANNOTATIONS: Final = (RESET_REQUEST_ANNOTATION, REBOOT_REQUEST_ANNOTATION)
"""What the node agent watches on its node."""

DEFAULT_XIDS: Final = (48, 63, 64, 74, 79, 92, 94, 95, 119, 120)
"""XIDs a GPU reset is NVIDIA's documented recovery for (or that a reset at least retires
the pages of): uncorrectable ECC, fallen off the bus, NVLink, GSP errors."""


class RemediationSpec(ApiModel):
    """GPU remediation (ours; the reference has none): fence, drain, reset and re-validate a
    node whose GPU the node agent finds sick, within limits. Needs `nodeAgent.enabled`."""

    enabled: bool = Field(default=False, description="Remediate sick GPUs (opt-in).")
    xids: list[Int32] = Field(
        default_factory=lambda: list(DEFAULT_XIDS),
        description="XIDs that start a remediation (the node agent's GPUHealthy reason XID).",
    )
    ecc: bool = Field(
        default=True,
        description="An ECC threshold (GPUHealthy reason ECCThreshold) starts a remediation.",
    )
    max_parallel: IntOrPercent = Field(
        default=1,
        description="Nodes in remediation at once, cluster-wide: a count or a percentage of "
        "GPU nodes.",
    )
    max_per_node_per_window: Int32 = Field(
        default=1,
        ge=1,
        description="Remediations of one node within `windowMinutes`; one more fails the node "
        "(it stays fenced with the condition GPURemediationFailed).",
    )
    window_minutes: Int32 = Field(
        default=60, ge=1, description="The window `maxPerNodePerWindow` counts in."
    )
    require_approval: bool = Field(
        default=False,
        description="Wait for the node annotation nvidia.com/gpu-remediation.approved=true "
        "before fencing.",
    )
    dry_run: bool = Field(
        default=False, description="Report (Events, metrics, status) what would be done; do it not."
    )
    reboot_on_failure: bool = Field(
        default=True,
        description="On a failed reset or a relapse, have the node agent write the host's "
        "reboot sentinel (/var/run/reboot-required, what kured acts on).",
    )
    drain_timeout_seconds: Int32 = Field(
        default=600,
        ge=0,
        description="How long evicting the GPU pods may take before the node fails (0: forever).",
    )
    reset_timeout_seconds: Int32 = Field(
        default=120, ge=1, description="How long the node agent's reset may take."
    )
    validation_timeout_seconds: Int32 = Field(
        default=300,
        ge=1,
        description="How long the node may take to validate again after the reset.",
    )
