"""Label keys that more than one part of the operator reads or writes, and their rules.

Keys and values are the reference operator's, so manifests, node selectors and dashboards
written for it keep working. A key only one package uses lives with it (the upgrade's
`nvidia.com/gpu-driver-upgrade*` keys in `components.upgrade`, but for the state label,
which the node labeller writes first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# -- written by Node Feature Discovery -----------------------------------------------------

NFD_PREFIX: Final = "feature.node.kubernetes.io/"
NFD_GPU_LABELS: Final = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
"""`true` on a node with an NVIDIA PCI device (any, display or 3D controller)."""
KERNEL_LABEL: Final = "feature.node.kubernetes.io/kernel-version.full"
"""The kernel a node runs."""
OS_ID_LABEL: Final = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION_LABEL: Final = "feature.node.kubernetes.io/system-os_release.VERSION_ID"

# -- node labels written by the operator and its operands ---------------------------------

GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"
"""`true` on a GPU node (the node labeller); what NVIDIADrivers select by default."""
DEPLOY_LABEL_PREFIX: Final = "nvidia.com/gpu.deploy."
"""`nvidia.com/gpu.deploy.<operand>`: whether the operand runs on the node."""
OPERANDS_OPT_OUT_LABEL: Final = "nvidia.com/gpu.deploy.operands"
"""`false` opts a node out of every operand (see `opted_out`)."""
DRIVER_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.driver"
MIG_MANAGER_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.mig-manager"

MIG_CONFIG_LABEL: Final = "nvidia.com/mig.config"
"""The MIG layout an admin asks of a node (a name in the MIG manager's config)."""
MIG_CONFIG_STATE_LABEL: Final = "nvidia.com/mig.config.state"
"""The MIG manager's progress on `MIG_CONFIG_LABEL`: `pending` (a real change, which needs
the GPUs idle: a layout already in place goes straight to `success`), `rebooting`,
`success`, `failed`."""
MIG_CAPABLE_LABEL: Final = "nvidia.com/mig.capable"
"""`true` on a node whose GPUs support MIG (GPU feature discovery)."""
GPU_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
"""The GPU model (GPU feature discovery), e.g. `NVIDIA-A100-SXM4-80GB`."""
VGPU_HOST_DRIVER_LABEL: Final = "nvidia.com/vgpu.host-driver-version"
"""Set on a vGPU host: its GPUs are shared through vGPU, never partitioned by MIG."""
WORKLOAD_CONFIG_LABEL: Final = "nvidia.com/gpu.workload.config"
"""What a node's GPUs serve with sandbox workloads on: `container`, `vm-passthrough` or
`vm-vgpu` (set by the admin; the policy's `sandboxWorkloads.defaultWorkload` otherwise)."""
CLIENT_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.client"
"""`true` on every GPU node; third-party GPU clients select on it so that they leave the
node while its driver restarts or its MIG layout changes."""
NODE_AGENT_DEPLOY_LABEL: Final = "nvidia.com/gpu.deploy.node-agent"
DRIVER_PRE_INSTALLED: Final = "pre-installed"
"""`nvidia.com/gpu.deploy.driver` on a node whose driver is installed on the host, as the
reference labels it: no driver pod goes there."""
DRIVER_UPGRADE_ENABLED_ANNOTATION: Final = "nvidia.com/gpu-driver-upgrade-enabled"
"""Node annotation, `true` on GPU nodes while the policy upgrades drivers automatically."""
DRIVER_UPGRADE_STATE_LABEL: Final = "nvidia.com/gpu-driver-upgrade-state"
"""Where a node is in the driver upgrade (`UpgradeState` values); absent = unknown. The
upgrade walk owns it; the node labeller writes its first value (`upgrade-done`) in the same
patch as a new GPU node's deploy labels, so that a node reaches ready in one label write.
The node agent lets go of the GPU while the walk restarts the driver."""

DRIVER_KERNEL_PIN_LABEL: Final = "nvidia.com/precompiled-driver.kernel-version.full"
"""With precompiled drivers: the kernel whose driver DaemonSet the node belongs to.

Precompiled driver DaemonSets select nodes on this label instead of the kernel label
itself. A kernel change would otherwise move the node from one DaemonSet to another at
once, and the DaemonSet controller would swap the driver under running GPU pods. The
upgrade controller writes it: right away where no driver runs yet (or auto upgrade is
off), and, once the node is cordoned and cleared, as the step that restarts its driver.
"""

# -- Pod Security Admission -------------------------------------------------------------------

POD_SECURITY_LABELS: Final = {
    f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")
}
"""With `spec.psa.enabled`, the labels the operator puts on its own namespace (as the
reference does): its operands are privileged pods, which a namespace at the cluster's
default Pod Security level (`baseline` or `restricted`) refuses."""

# -- labels on what the operator renders ---------------------------------------------------

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE: Final = "gpu-operator"
"""The value of `MANAGED_BY_LABEL` on everything we render (our informers select on it)."""
COMPONENT_LABEL: Final = "nvidia.com/gpu-operator.component"
"""The operand (state name) an object belongs to; the controller prunes by it."""
NVIDIA_DRIVER_OWNER_LABEL: Final = "nvidia.com/gpu-operator.nvidiadriver"
"""On DaemonSets rendered for an NVIDIADriver: the NVIDIADriver's name."""


def opted_out(labels: Mapping[str, str]) -> bool:
    """`nvidia.com/gpu.deploy.operands=false`: no operand runs on the node, whatever its
    other deploy labels say (the node labeller removes them)."""
    return labels.get(OPERANDS_OPT_OUT_LABEL) == "false"


#: Substrings of `nvidia.com/gpu.product` (lower case) of GPUs that support MIG.
MIG_PRODUCTS: Final = ("a100", "a30", "h100", "h200", "b200")


def mig_capable(labels: Mapping[str, str]) -> bool:
    """The node's GPUs support MIG: GPU feature discovery says so, or (before it has run)
    the product is one that does; a vGPU host never counts."""
    if labels.get(VGPU_HOST_DRIVER_LABEL):
        return False
    if MIG_CAPABLE_LABEL in labels:
        return labels[MIG_CAPABLE_LABEL] == "true"
    product = labels.get(GPU_PRODUCT_LABEL, "").lower()
    return any(model in product for model in MIG_PRODUCTS)


DRIVER_CONFIG_DIGEST_ENV: Final = "DRIVER_CONFIG_DIGEST"
"""The env var, on the driver manager and driver containers, holding a digest of what the
driver is installed with (the reference's name and meaning): a driver container that
starts with the digest the loaded driver was installed with keeps it loaded."""
DRIVER_CONFIG_DIGEST_ANNOTATION: Final = "nvidia.com/gpu-driver-config-digest"
"""The same digest on the driver pod template's annotations, so the upgrade reads a running
driver pod's digest from its cached metadata (the pod cache keeps no env)."""
