"""Drivers from NVIDIADriver resources (`driver.useNvidiaDriverCRD: true`).

The driver renderer is reused as it is: an NVIDIADriver's spec becomes a `driver` section
of a copy of the active ClusterPolicy, the view holds only the NVIDIADriver's nodes, and of
what comes back only the DaemonSets are kept, renamed for the NVIDIADriver and narrowed to
its pool. The ServiceAccount, RBAC and startup-probe ConfigMap that every driver pod uses
stay the ClusterPolicy's, so several NVIDIADrivers never fight over one object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from components.api import (
    NVIDIA_DRIVER_OWNER_LABEL,
    ClusterPolicy,
    DriverSpec,
    NVIDIADriverSpec,
)
from components.operands import safe_name

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

DRIVER_DAEMONSET_PREFIX = "nvidia-driver-daemonset"
OS_RELEASE_LABEL = "nvidia.com/node.os-version"


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
    """A copy of `policy` whose `driver` section is `driver`."""
    spec = policy.spec.model_copy(update={"driver": driver})
    return policy.model_copy(update={"spec": spec})


def policy_without_driver_crd(policy: ClusterPolicy) -> ClusterPolicy:
    """A copy that renders the driver itself (used for the shared objects only)."""
    driver = policy.spec.driver.model_copy(update={"use_nvidia_driver_crd": False})
    return policy_with_driver(policy, driver)


def daemonset_name(original: str, nvidia_driver: str, driver_type: str) -> str:
    """`nvidia-driver-daemonset-ubuntu22.04` -> `nvidia-gpu-driver-<name>-ubuntu22.04`."""
    suffix = original.removeprefix(DRIVER_DAEMONSET_PREFIX)
    return safe_name(f"nvidia-{driver_type}-driver-{nvidia_driver}{suffix}")


def _rename(ds: dict[str, Any], name: str) -> None:
    """Name the DaemonSet `name` and make `app: <name>` its pods' label and its whole
    selector: the ClusterPolicy's selector (`app=nvidia-driver-daemonset` and the OS
    release) would overlap with another NVIDIADriver's for the same OS."""
    ds["metadata"]["name"] = name
    ds["metadata"]["labels"]["app"] = name
    ds["spec"]["selector"] = {"matchLabels": {"app": name}}
    ds["spec"]["template"]["metadata"]["labels"]["app"] = name


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
    spec: NVIDIADriverSpec,
    selector: Mapping[str, str],
    exclude_terms: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A driver DaemonSet rendered from the ClusterPolicy, made the NVIDIADriver's."""
    out = copy.deepcopy(dict(ds))
    original = out["metadata"]["name"]
    if original == DRIVER_DAEMONSET_PREFIX:  # a single OS's: name the OS all the same
        original += "-" + out["metadata"]["labels"].get(OS_RELEASE_LABEL, "")
    _rename(out, daemonset_name(original, nvidia_driver, spec.driver_type))
    out["metadata"]["labels"][NVIDIA_DRIVER_OWNER_LABEL] = nvidia_driver
    template = out["spec"]["template"]
    pod = template["spec"]
    pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **selector}
    _add_affinity(pod, exclude_terms)
    if spec.labels:
        template["metadata"]["labels"] = {**spec.labels, **template["metadata"]["labels"]}
    if spec.annotations:
        template["metadata"]["annotations"] = {
            **template["metadata"].get("annotations", {}),
            **spec.annotations,
        }
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
