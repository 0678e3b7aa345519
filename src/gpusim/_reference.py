"""What NVIDIA's GPU Operator leaves on a cluster it ran on, recreated as our own fixture.

The takeover tests start from here: a cluster the reference operator managed, stopped,
before ours starts with the same ClusterPolicy. Modelled on the facts of the reference's
public manifests (`assets/state-*`): its object names, the `app` labels its pods carry and
its DaemonSets select on, its driver DaemonSet (`OnDelete`, the `nvidia-driver` component
label, pod anti-affinity on it, `nvidia.com/gpu.deploy.driver` node selector), every object
owned by the ClusterPolicy through a controller ownerReference and none carrying our
component label. Also what its node labeller and upgrade controller wrote on the nodes, and
the policy status it left (`ready`).

Only what a takeover meets is modelled: one container per pod (the simulated node reads
the driver version from the driver image tag), no probes or volumes.

    installed = await reference_install(client, policy, namespace="gpu-operator",
                                        gpu_nodes=sim.gpu_nodes)
    installed.daemonsets     # the names of the DaemonSets it created
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler import GVK, Client, Object, name_of, uid_of
from reconciler.kinds import NODE

CLUSTER_POLICY = GVK("nvidia.com", "v1", "ClusterPolicy")

DRIVER_VERSION = "570.148.08"
"""The driver the reference ran (ours then brings the policy's own version)."""

REFERENCE_DEPLOY_LABELS = (
    "driver",
    "container-toolkit",
    "device-plugin",
    "gpu-feature-discovery",
    "dcgm",
    "dcgm-exporter",
    "operator-validator",
    "mig-manager",
    "node-status-exporter",
)
"""`nvidia.com/gpu.deploy.<operand>` labels its node labeller sets `true` on GPU nodes."""

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_ENABLED_ANNOTATION = "nvidia.com/gpu-driver-upgrade-enabled"


@dataclass(frozen=True)
class ReferenceDaemonSet:
    name: str
    deploy: str
    """The `nvidia.com/gpu.deploy.<deploy>` node label it selects on."""
    image: str
    account: str
    template_labels: dict[str, str] = field(default_factory=dict)
    selector: dict[str, str] = field(default_factory=dict)
    """Selector labels besides `app` (the validator and GFD select on `part-of` too)."""


REFERENCE_DRIVER_DAEMONSET = "nvidia-driver-daemonset"
"""The name of its driver DaemonSet for a ClusterPolicy on a single-OS cluster, ours too."""


def reference_daemonsets(
    driver_version: str = DRIVER_VERSION, driver_daemonset: str = REFERENCE_DRIVER_DAEMONSET
) -> list[ReferenceDaemonSet]:
    """Its DaemonSets on an Ubuntu 22.04 cluster with MIG manager and MPS deployed; the
    driver's named `driver_daemonset` (another name than ours: a takeover fences it rather
    than adopting it)."""
    return [
        ReferenceDaemonSet(
            driver_daemonset,
            "driver",
            f"nvcr.io/nvidia/driver:{driver_version}-ubuntu22.04",
            "nvidia-driver",
            {"app.kubernetes.io/component": "nvidia-driver", "nvidia.com/precompiled": "false"},
        ),
        ReferenceDaemonSet(
            "nvidia-container-toolkit-daemonset",
            "container-toolkit",
            "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04",
            "nvidia-container-toolkit",
        ),
        ReferenceDaemonSet(
            "nvidia-device-plugin-daemonset",
            "device-plugin",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.2",
            "nvidia-device-plugin",
        ),
        ReferenceDaemonSet(
            "nvidia-device-plugin-mps-control-daemon",
            "device-plugin",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.2",
            "nvidia-device-plugin",
        ),
        ReferenceDaemonSet(
            "gpu-feature-discovery",
            "gpu-feature-discovery",
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.2",
            "nvidia-gpu-feature-discovery",
            selector={"app.kubernetes.io/part-of": "nvidia-gpu"},
        ),
        ReferenceDaemonSet(
            "nvidia-dcgm-exporter",
            "dcgm-exporter",
            "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
            "nvidia-dcgm-exporter",
        ),
        ReferenceDaemonSet(
            "nvidia-operator-validator",
            "operator-validator",
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.1",
            "nvidia-operator-validator",
            selector={"app.kubernetes.io/part-of": "gpu-operator"},
        ),
        ReferenceDaemonSet(
            "nvidia-mig-manager",
            "mig-manager",
            "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.12.1-ubuntu20.04",
            "nvidia-mig-manager",
        ),
    ]


@dataclass
class ReferenceInstall:
    """What `reference_install` created (names), to check they are gone or adopted later."""

    daemonsets: list[str] = field(default_factory=list)
    objects: list[tuple[str, str]] = field(default_factory=list)
    """(kind, name) of everything else."""


def owner_of(policy: Object) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "name": name_of(policy),
        "uid": uid_of(policy),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(name: str, owner: dict[str, Any], namespace: str | None, **labels: str) -> Object:
    meta: Object = {"name": name, "ownerReferences": [owner]}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _daemonset(ds: ReferenceDaemonSet, owner: dict[str, Any], namespace: str) -> Object:
    selector = {"app": ds.name, **ds.selector}
    labels = {**selector, **ds.template_labels}
    # The reference names its driver's container alike whatever its DaemonSet's name (a
    # precompiled one's has the kernel in it, dots a container name must not have).
    short = "nvidia-driver" if ds.deploy == "driver" else ds.name.removeprefix("nvidia-")
    pod: Object = {
        "nodeSelector": {f"nvidia.com/gpu.deploy.{ds.deploy}": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "system-node-critical",
        "serviceAccountName": ds.account,
        "containers": [{"name": f"{short}-ctr", "image": ds.image}],
    }
    strategy: Object = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    if ds.deploy == "driver":
        strategy = {"type": "OnDelete"}
        pod["hostPID"] = True
        pod["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {
                                    "key": "app.kubernetes.io/component",
                                    "operator": "In",
                                    "values": ["nvidia-driver"],
                                }
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(ds.name, owner, namespace, **labels),
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": strategy,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }


def _others(owner: dict[str, Any], namespace: str, accounts: Sequence[str]) -> list[Object]:
    """Its ServiceAccounts and RBAC (one set per operand), ConfigMaps, the RuntimeClass and
    the DCGM exporter's Service."""
    out: list[Object] = []
    rbac = "rbac.authorization.k8s.io/v1"
    for account in accounts:
        subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
        rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
        out += [
            {"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": _meta(account, owner, namespace)},
            {"apiVersion": rbac, "kind": "Role", "metadata": _meta(account, owner, namespace),
             "rules": rules},
            {"apiVersion": rbac, "kind": "RoleBinding",
             "metadata": _meta(account, owner, namespace),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
             "subjects": subject},
            {"apiVersion": rbac, "kind": "ClusterRole", "metadata": _meta(account, owner, None),
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]},
            {"apiVersion": rbac, "kind": "ClusterRoleBinding",
             "metadata": _meta(account, owner, None),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": account},
             "subjects": subject},
        ]  # fmt: skip
    for name, key in (
        ("nvidia-driver-startup-probe", "startup-probe.sh"),
        ("default-mig-parted-config", "config.yaml"),
        ("default-gpu-clients", "clients.yaml"),
    ):
        out.append(
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": _meta(name, owner, namespace), "data": {key: "# reference\n"}}
        )  # fmt: skip
    out.append(
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
         "metadata": _meta("nvidia", owner, None), "handler": "nvidia"}
    )  # fmt: skip
    out.append(
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta("nvidia-dcgm-exporter", owner, namespace, app="nvidia-dcgm-exporter"),
         "spec": {"selector": {"app": "nvidia-dcgm-exporter"},
                  "ports": [{"name": "gpu-metrics", "port": 9400, "targetPort": 9400}]}}
    )  # fmt: skip
    return out


async def reference_install(
    client: Client,
    policy: Object,
    *,
    namespace: str,
    gpu_nodes: Sequence[str],
    driver_version: str = DRIVER_VERSION,
    driver_daemonset: str = REFERENCE_DRIVER_DAEMONSET,
    upgrade_state: str | None = "upgrade-done",
) -> ReferenceInstall:
    """Create, as the reference operator would have, its objects for `policy` (as read from
    the server, with its uid), its node labels and annotations on `gpu_nodes`, and its
    `ready` status on the policy. The DaemonSet controller then runs its pods (kwok).
    `driver_daemonset` names its driver DaemonSet (`reference_daemonsets`)."""
    owner = owner_of(policy)
    installed = ReferenceInstall()
    daemonsets = reference_daemonsets(driver_version, driver_daemonset)
    accounts = list(dict.fromkeys(ds.account for ds in daemonsets))
    for obj in _others(owner, namespace, accounts):
        await client.create(obj)
        installed.objects.append((str(obj["kind"]), name_of(obj)))
    labels: dict[str, str | None] = {"nvidia.com/gpu.present": "true"}
    labels.update({f"nvidia.com/gpu.deploy.{d}": "true" for d in REFERENCE_DEPLOY_LABELS})
    if upgrade_state:
        labels[UPGRADE_STATE_LABEL] = upgrade_state
    for node in gpu_nodes:
        body = {
            "metadata": {
                "labels": labels,
                "annotations": {UPGRADE_ENABLED_ANNOTATION: "true"},
            }
        }
        await client.patch(NODE, node, body)
    for ds in daemonsets:
        await client.create(_daemonset(ds, owner, namespace))
        installed.daemonsets.append(ds.name)
    status = {
        "status": {
            "state": "ready",
            "namespace": namespace,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Reconciled",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
                {
                    "type": "Error",
                    "status": "False",
                    "reason": "Ready",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
            ],
        }
    }
    await client.patch(CLUSTER_POLICY, name_of(policy), status, subresource="status")
    return installed
