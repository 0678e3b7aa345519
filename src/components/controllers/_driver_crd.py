"""Drivers from NVIDIADriver resources (`driver.useNvidiaDriverCRD: true`).

The driver renderer is reused as it is: an NVIDIADriver's spec becomes a `driver` section
of a copy of the active ClusterPolicy, the view holds only the NVIDIADriver's nodes, and of
what comes back the DaemonSets are kept, renamed for the NVIDIADriver and narrowed to its
pool, with a ServiceAccount and RBAC of its own per OS, named as the reference names them:

* DaemonSet `nvidia-<driverType>-driver-<osTag>-<hash>`, the hash of the NVIDIADriver's
  UID (and, precompiled, the kernel), so two NVIDIADrivers never share a name and a
  runbook's `nvidia-gpu-driver-ubuntu22.04-*` still finds them;
* ServiceAccount, Role, ClusterRole and bindings `nvidia-<driverType>-driver-<name>-<osTag>`
  (`nvidia-vgpu-manager-<name>-<osTag>` for `vgpu-host-manager`).

The startup-probe ConfigMap, and the ClusterPolicy's own driver ServiceAccount (pods of an
older operator version, handed over without a restart, still run under it), stay the
ClusterPolicy's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    NVIDIA_DRIVER_OWNER_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    ClusterPolicy,
    DriverSideSpec,
    DriverSpec,
    NVIDIADriverSpec,
)
from reconciler import labels_of, metadata_of

#: NVIDIADriver fields that mean the same in ClusterPolicy's `driver` section.
_SAME_FIELDS = (
    "repository",
    "image",
    "version",
    "imagePullPolicy",
    "imagePullSecrets",
    "resources",
    "args",
    "env",
    "usePrecompiled",
    "useOpenKernelModules",
    "kernelModuleType",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
    "rdma",
    "manager",
    "certConfig",
    "kernelModuleConfig",
    "secretEnv",
)

#: What a label value (and so the DaemonSet's name, its pods' `app` label) may be.
_LABEL_MAX = 63
#: An object name (ServiceAccount, RBAC).
_NAME_MAX = 253
#: Kubernetes' alphabet for generated name suffixes (no vowels, no look-alikes).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: Objects every driver pod of one NVIDIADriver and OS runs under.
RBAC_KINDS = frozenset(
    {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
)


def uses_driver_crd(policy: ClusterPolicy) -> bool:
    driver = policy.spec.driver
    return driver.enabled and driver.use_nvidia_driver_crd


def driver_section(spec: NVIDIADriverSpec) -> DriverSpec:
    """ClusterPolicy's `driver` section saying what the NVIDIADriver says."""
    given = spec.to_dict()
    section: dict[str, Any] = {k: given[k] for k in _SAME_FIELDS if k in given}
    if "image" not in section:
        section["image"] = spec.image  # its CRD default is a full path
    if spec.repo_config.name:
        section["repoConfig"] = {"configMapName": spec.repo_config.name}
    if spec.virtual_topology_config.name:
        section["virtualTopology"] = {"config": spec.virtual_topology_config.name}
    licensing = spec.licensing_config
    if licensing.secret_name or licensing.name:
        section["licensingConfig"] = {
            "secretName": licensing.secret_name,
            "configMapName": licensing.name,
            "nlsEnabled": licensing.nls_enabled,
        }
    section["enabled"] = True
    section["useNvidiaDriverCRD"] = False
    return DriverSpec.from_dict(section)


def policy_with_driver(policy: ClusterPolicy, driver: DriverSpec) -> ClusterPolicy:
    """A copy of `policy` whose `driver` section is `driver`. The ClusterPolicy's
    GPUDirect sidecars (`gds`, `gdrcopy`) are not an NVIDIADriver's: its pods run without
    them (its own `gds` / `gdrcopy` sections are not acted on yet)."""
    spec = policy.spec.model_copy(
        update={"driver": driver, "gds": DriverSideSpec(), "gdrcopy": DriverSideSpec()}
    )
    return policy.model_copy(update={"spec": spec})


def policy_without_driver_crd(policy: ClusterPolicy) -> ClusterPolicy:
    """A copy that renders the driver itself (used for the shared objects only)."""
    driver = policy.spec.driver.model_copy(update={"use_nvidia_driver_crd": False})
    return policy_with_driver(policy, driver)


def _fnv32a(text: str) -> int:
    value = 0x811C9DC5
    for byte in text.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def short_hash(text: str) -> str:
    """The reference's name hash: FNV-32a, in decimal, each digit spelt in Kubernetes'
    safe alphabet (`7c6d7bd86b`)."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in str(_fnv32a(text)))


def os_tag(os_id: str, version_id: str) -> str:
    """The OS part of the reference's driver names: `ubuntu22.04`, `rhel9.4`; the major
    version only for Rocky and for RHEL 10 and later (`rocky9`, `rhel10`)."""
    major = version_id.split(".")[0]
    major_only = os_id == "rocky" or (os_id == "rhel" and major.isdigit() and int(major) >= 10)
    return f"{os_id}{major if major_only else version_id}"


def daemonset_name(driver_type: str, tag: str, uid: str, kernel: str | None = None) -> str:
    """`nvidia-<driverType>-driver-<osTag>-<hash>`, at most 63 characters (the prefix is
    cut, never the hash)."""
    digest = short_hash(uid if not kernel else f"{uid}-{kernel}")
    prefix = f"nvidia-{driver_type}-driver-{tag}"[: _LABEL_MAX - len(digest) - 1]
    return f"{prefix}-{digest}"


def account_name(nvidia_driver: str, driver_type: str, tag: str) -> str:
    """The ServiceAccount (and Role, ClusterRole, bindings) of one NVIDIADriver's pods on
    one OS."""
    if driver_type == "vgpu-host-manager":
        return f"nvidia-vgpu-manager-{nvidia_driver}-{tag}"[:_NAME_MAX]
    return f"nvidia-{driver_type}-driver-{nvidia_driver}-{tag}"[:_NAME_MAX]


def _pool_of(ds: Mapping[str, Any]) -> tuple[str, str | None]:
    """The OS tag and (precompiled) kernel a rendered driver DaemonSet is for."""
    selector = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    tag = os_tag(selector.get(OS_ID_LABEL, ""), selector.get(OS_VERSION_LABEL, ""))
    return tag, selector.get(DRIVER_KERNEL_PIN_LABEL)


def accounts_for(
    rbac: Sequence[Mapping[str, Any]], daemonsets: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The driver renderer's ServiceAccount and RBAC, once per ServiceAccount that
    `daemonsets` (already made the NVIDIADriver's) run under, renamed for it."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ds in daemonsets:
        account = ds["spec"]["template"]["spec"]["serviceAccountName"]
        if account in seen:
            continue
        seen.add(account)
        owner = labels_of(ds)[NVIDIA_DRIVER_OWNER_LABEL]
        for obj in rbac:
            copied = copy.deepcopy(dict(obj))
            metadata_of(copied)["name"] = account
            metadata_of(copied)["labels"][NVIDIA_DRIVER_OWNER_LABEL] = owner
            if "roleRef" in copied:
                copied["roleRef"]["name"] = account
                for subject in copied.get("subjects", []):
                    subject["name"] = account
            out.append(copied)
    return out


def _rename(ds: dict[str, Any], name: str) -> None:
    """Name the DaemonSet `name` and make `app: <name>` its pods' label and its whole
    selector: the ClusterPolicy's selector (`app=nvidia-driver-daemonset` and the OS
    release) would overlap with another NVIDIADriver's for the same OS."""
    metadata_of(ds)["name"] = name
    metadata_of(ds)["labels"]["app"] = name
    ds["spec"]["selector"] = {"matchLabels": {"app": name}}
    metadata_of(ds["spec"]["template"])["labels"]["app"] = name


def _add_affinity(pod: dict[str, Any], terms: Sequence[Mapping[str, Any]]) -> None:
    if not terms:
        return
    node_affinity = pod.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [dict(t) for t in terms]
    }


def for_nvidia_driver(
    ds: Mapping[str, Any],
    *,
    nvidia_driver: str,
    uid: str,
    spec: NVIDIADriverSpec,
    selector: Mapping[str, str],
    exclude_terms: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A driver DaemonSet rendered from the ClusterPolicy, made the NVIDIADriver's (`uid`)."""
    out = copy.deepcopy(dict(ds))
    tag, kernel = _pool_of(out)
    _rename(out, daemonset_name(spec.driver_type, tag, uid, kernel))
    metadata_of(out)["labels"][NVIDIA_DRIVER_OWNER_LABEL] = nvidia_driver
    template = out["spec"]["template"]
    pod = template["spec"]
    pod["serviceAccountName"] = account_name(nvidia_driver, spec.driver_type, tag)
    pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **selector}
    _add_affinity(pod, exclude_terms)
    template_meta = metadata_of(template)
    if spec.labels:
        template_meta["labels"] = {**spec.labels, **template_meta["labels"]}
    if spec.annotations:
        template_meta["annotations"] = {**template_meta.get("annotations", {}), **spec.annotations}
    if spec.tolerations:
        pod["tolerations"] = [*pod.get("tolerations", []), *(t.to_dict() for t in spec.tolerations)]
    if spec.priority_class_name:
        pod["priorityClassName"] = spec.priority_class_name
    # The NVIDIADriver's own podSecurityContext, not the ClusterPolicy's `daemonsets` one.
    pod.pop("securityContext", None)
    if spec.pod_security_context and (security := spec.pod_security_context.to_dict()):
        pod["securityContext"] = security
    if spec.host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    return out
