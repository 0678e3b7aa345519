"""What every operand renderer shares: the types the controller passes in and gets back,
the gate on the policy's switch (`BaseOperand`), the labels that mark what the operator
owns, Kubernetes-valid names, and small builders for the objects (ServiceAccount, RBAC,
ConfigMap, DaemonSet, Service, containers, env, volumes).

Renderers are pure: they read a `ClusterPolicy` and a `ClusterView` (what the controller's
cache knows about the cluster) and return complete objects. Nothing here talks to the API
server.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    MIG_CAPABLE_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
    ClusterPolicy,
    ClusterPolicySpec,
    ComponentSpec,
    EnvVar,
    ImageError,
    ImageSpec,
    ResourceRequirements,
    operand_image,
)
from components.api import (
    Operand as ImageOperand,
)

# --- labels and well-known names ------------------------------------------------------

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gpu-operator"
#: The operand (state name) an object belongs to; the controller prunes by it.
COMPONENT_LABEL = "nvidia.com/gpu-operator.component"
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
DEPLOY_OPERANDS_LABEL = "nvidia.com/gpu.deploy.operands"

LABEL_OS_ID = OS_ID_LABEL
LABEL_OS_VERSION = OS_VERSION_LABEL
LABEL_KERNEL = KERNEL_LABEL
LABEL_MIG_CAPABLE = MIG_CAPABLE_LABEL

VALIDATIONS_DIR = "/run/nvidia/validations"
DEFAULT_PRIORITY_CLASS = "system-node-critical"
DEFAULT_RUNTIME_CLASS = "nvidia"
DEFAULT_DRIVER_INSTALL_DIR = "/run/nvidia/driver"

#: Every operand pod tolerates the GPU taint, whatever `daemonsets.tolerations` adds.
GPU_TOLERATION: Mapping[str, str] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}

#: Most nodes a condition message names before it says "and N more".
MAX_NAMED_NODES = 10

# --- the contract with the controller -------------------------------------------------


@dataclass(frozen=True)
class GPUNode:
    """What a renderer may know about one GPU node (from the controller's node cache)."""

    name: str
    labels: Mapping[str, str]
    os_id: str | None  # feature.node.kubernetes.io/system-os_release.ID
    os_version: str | None  # ...VERSION_ID
    kernel: str | None  # feature.node.kubernetes.io/kernel-version.full
    container_runtime: str  # node.status.nodeInfo.containerRuntimeVersion
    mig_capable: bool
    #: The kernel whose precompiled driver DaemonSet the node is in (DRIVER_KERNEL_PIN_LABEL).
    pinned_kernel: str | None = None

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> GPUNode:
        """Build one from a Node object (dict) as the API server returns it."""
        meta = node.get("metadata") or {}
        labels: Mapping[str, str] = meta.get("labels") or {}
        info = (node.get("status") or {}).get("nodeInfo") or {}
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(labels),
            os_id=labels.get(LABEL_OS_ID) or None,
            os_version=labels.get(LABEL_OS_VERSION) or None,
            kernel=labels.get(LABEL_KERNEL) or None,
            pinned_kernel=labels.get(DRIVER_KERNEL_PIN_LABEL) or None,
            container_runtime=str(info.get("containerRuntimeVersion", "")),
            mig_capable=labels.get(LABEL_MIG_CAPABLE) == "true",
        )


@dataclass(frozen=True)
class ClusterView:
    """What the renderers may know about the cluster."""

    namespace: str  # operator namespace where operands run
    gpu_nodes: Sequence[GPUNode]
    has_service_monitor_crd: bool
    #: ownerReference (controller=True) for the ClusterPolicy, added to every object.
    owner: Mapping[str, Any] | None
    #: Environment the default images are read from (`DRIVER_IMAGE`, ...; as OLM sets
    #: them on the operator). None: the operator process's own environment.
    image_env: Mapping[str, str] | None = None
    #: Keys of the ConfigMaps in `namespace` (name -> data keys), for the ConfigMaps a
    #: policy names whose files are mounted one by one (driver `kernelModuleConfig`,
    #: `repoConfig`, `certConfig`). A named ConfigMap missing here gives a condition.
    config_map_keys: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered:
    """Everything an operand wants to exist, and the problems found while rendering."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    #: (reason, message), e.g. ("KernelLabelMissing", "nodes a, b have no ... label")
    conditions: list[tuple[str, str]] = field(default_factory=list)


class Operand(Protocol):
    """One operand: a reference state name, its node deploy label, and its renderer."""

    name: str
    deploy_label: str | None

    def enabled(self, policy: ClusterPolicy) -> bool: ...

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Rendered: ...


# --- names ----------------------------------------------------------------------------

_INVALID = re.compile(r"[^a-z0-9.-]+")
_DASHES = re.compile(r"-{2,}")


def short_hash(text: str, length: int = 8) -> str:
    """A stable, short hex digest of `text` (for names that must stay unique)."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def safe_name(name: str, *, max_length: int = 63, unique_by: str | None = None) -> str:
    """`name` as a valid Kubernetes DNS label (also a valid label value).

    Lower case; characters other than `a-z 0-9 . -` become `-`; no leading or trailing
    punctuation. When it is longer than `max_length` (or `unique_by` is given), the end is
    cut and `-<hash>` of the original (or of `unique_by`) appended, so two long names that
    share a prefix stay different.
    """
    cleaned = _DASHES.sub("-", _INVALID.sub("-", name.lower())).strip("-.")
    if len(cleaned) <= max_length and unique_by is None:
        return cleaned or short_hash(name)
    suffix = short_hash(name if unique_by is None else unique_by)
    head = cleaned[: max_length - len(suffix) - 1].rstrip("-.")
    return f"{head}-{suffix}" if head else suffix


def name_list(names: Iterable[str]) -> str:
    """`a, b, c` (sorted), or `a, b, ... and 7 more` beyond `MAX_NAMED_NODES`."""
    ordered = sorted(names)
    shown = ", ".join(ordered[:MAX_NAMED_NODES])
    rest = len(ordered) - MAX_NAMED_NODES
    return f"{shown} and {rest} more" if rest > 0 else shown


def nodes_phrase(names: Iterable[str], verb: tuple[str, str] = ("has", "have")) -> str:
    """`GPU node a has` / `GPU nodes a, b have` (the list as `name_list` writes it)."""
    ordered = list(names)
    if len(ordered) == 1:
        return f"GPU node {ordered[0]} {verb[0]}"
    return f"GPU nodes {name_list(ordered)} {verb[1]}"


def deploy_label(operand: str) -> str:
    """`nvidia.com/gpu.deploy.<operand>`."""
    return DEPLOY_LABEL_PREFIX + operand


def wants_operand(node: GPUNode, label: str) -> bool:
    """Whether a node should run an operand: not opted out (`gpu.deploy.operands=false`)
    and the operand's deploy label is not `false` (absent counts as wanted: the node
    labeler sets it soon)."""
    if node.labels.get(DEPLOY_OPERANDS_LABEL) == "false":
        return False
    return node.labels.get(label, "true") not in ("false", "pre-installed")


# --- one render: policy + view + which operand ------------------------------------------


@dataclass(frozen=True)
class Ctx:
    """The inputs of one render, with helpers that stamp every object the same way."""

    policy: ClusterPolicy
    view: ClusterView
    component: str  # the operand's state name

    @property
    def spec(self) -> ClusterPolicySpec:
        return self.policy.spec

    @property
    def namespace(self) -> str:
        return self.view.namespace

    def labels(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        out = dict(extra or {})
        out[MANAGED_BY_LABEL] = MANAGED_BY
        out[COMPONENT_LABEL] = self.component
        return out

    def meta(
        self,
        name: str,
        *,
        namespaced: bool = True,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if namespaced:
            meta["namespace"] = self.namespace
        meta["labels"] = self.labels(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        if self.view.owner is not None:
            meta["ownerReferences"] = [dict(self.view.owner)]
        return meta

    def image(self, operand: ImageOperand) -> str:
        return operand_image(self.spec, operand, env=self.view.image_env)

    @property
    def validator_image(self) -> str:
        return self.image(ImageOperand.OPERATOR_VALIDATOR)

    @property
    def runtime_class(self) -> str:
        return self.spec.operator.runtime_class or DEFAULT_RUNTIME_CLASS

    @property
    def host_root(self) -> str:
        return self.spec.host_paths.root_fs or "/"

    @property
    def driver_install_dir(self) -> str:
        return self.spec.host_paths.driver_install_dir or DEFAULT_DRIVER_INSTALL_DIR


def image_or_condition(
    ctx: Ctx, operand: ImageOperand, rendered: Rendered, reason: str = "ImageInvalid"
) -> str | None:
    """The operand's image, or None after adding a condition that says why not."""
    try:
        return ctx.image(operand)
    except ImageError as exc:
        rendered.conditions.append((reason, f"{ctx.component}: {exc}"))
        return None


class BaseOperand(ABC):
    """An `Operand` whose `render` is empty while the policy switches it off.

    The gate lives here so that no operand can render objects for a disabled state (the
    controller would apply them, then prune them on the next pass); each operand still
    says for itself when it is enabled and what it renders.
    """

    name: str
    deploy_label: str | None

    @abstractmethod
    def enabled(self, policy: ClusterPolicy) -> bool: ...

    def render(self, policy: ClusterPolicy, view: ClusterView) -> Rendered:
        if not self.enabled(policy):
            return Rendered()
        return self._render(Ctx(policy, view, self.name))

    @abstractmethod
    def _render(self, ctx: Ctx) -> Rendered:
        """What the operand wants while it is enabled."""


# --- object builders ------------------------------------------------------------------


def service_account(ctx: Ctx, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": ctx.meta(name)}


def rule(groups: Sequence[str], resources: Sequence[str], verbs: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": list(groups), "resources": list(resources), "verbs": list(verbs)}


def role(ctx: Ctx, name: str, rules: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A Role and the RoleBinding that gives it to the ServiceAccount of the same name."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": ctx.meta(name),
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": ctx.meta(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ctx.namespace}],
        },
    ]


def cluster_role(
    ctx: Ctx, name: str, rules: Sequence[Mapping[str, Any]], *, account: str | None = None
) -> list[dict[str, Any]]:
    """A ClusterRole and the ClusterRoleBinding that gives it to a ServiceAccount."""
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": ctx.meta(name, namespaced=False),
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": ctx.meta(name, namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": account or name, "namespace": ctx.namespace}
            ],
        },
    ]


def account_and_rbac(
    ctx: Ctx,
    account: str,
    *,
    rules: Sequence[Mapping[str, Any]] = (),
    cluster_rules: Sequence[Mapping[str, Any]] = (),
    cluster_role_name: str | None = None,
) -> list[dict[str, Any]]:
    """The ServiceAccount an operand's pods run as, then the Role and ClusterRole (with
    their bindings) that give it `rules` and `cluster_rules`.

    The roles are named after the account, as the reference names them; only the DCGM
    exporter's ClusterRole has a name of its own (`cluster_role_name`).
    """
    objects = [service_account(ctx, account)]
    if rules:
        objects += role(ctx, account, rules)
    if cluster_rules:
        objects += cluster_role(ctx, cluster_role_name or account, cluster_rules, account=account)
    return objects


def config_map(
    ctx: Ctx, name: str, data: Mapping[str, str], *, labels: Mapping[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.meta(name, labels=labels),
        "data": dict(data),
    }


# --- containers -------------------------------------------------------------------------


def env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def env_field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def set_env(envs: list[dict[str, Any]], name: str, value: str) -> None:
    """Set `name` to `value`, in place where it already is (a `valueFrom` is replaced)."""
    for i, item in enumerate(envs):
        if item.get("name") == name:
            envs[i] = env(name, value)
            return
    envs.append(env(name, value))


def get_env(envs: Sequence[Mapping[str, Any]], name: str) -> str | None:
    for item in envs:
        if item.get("name") == name and "value" in item:
            return str(item["value"])
    return None


def merge_env(
    defaults: Iterable[Mapping[str, Any]], overrides: Iterable[EnvVar] = ()
) -> list[dict[str, Any]]:
    """The operator's env with the user's `env` applied on top (user wins, order kept)."""
    out = [dict(item) for item in defaults]
    for item in overrides:
        set_env(out, item.name, item.value)
    return out


def pull_policy(spec: ImageSpec) -> str:
    return spec.image_pull_policy or "IfNotPresent"


def resources(spec: ResourceRequirements) -> dict[str, Any] | None:
    """The container `resources`, or None when the policy sets none."""
    out: dict[str, Any] = {}
    if spec.limits:
        out["limits"] = dict(spec.limits)
    if spec.requests:
        out["requests"] = dict(spec.requests)
    return out or None


def apply_component(container: dict[str, Any], spec: ComponentSpec) -> dict[str, Any]:
    """Apply an operand section's resources and args to its main container (in place)."""
    res = resources(spec.resources)
    if res is not None:
        container["resources"] = res
    if spec.args:
        container["args"] = list(spec.args)
    return container


def mount(
    name: str,
    path: str,
    *,
    read_only: bool = False,
    propagation: str | None = None,
    sub_path: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "mountPath": path}
    if read_only:
        out["readOnly"] = True
    if propagation:
        out["mountPropagation"] = propagation
    if sub_path:
        out["subPath"] = sub_path
    return out


def host_path(name: str, path: str, type_: str | None = None) -> dict[str, Any]:
    source: dict[str, Any] = {"path": path}
    if type_:
        source["type"] = type_
    return {"name": name, "hostPath": source}


def config_map_volume(
    name: str, config_map_name: str, *, mode: int | None = None, items: Sequence[str] = ()
) -> dict[str, Any]:
    source: dict[str, Any] = {"name": config_map_name}
    if mode is not None:
        source["defaultMode"] = mode
    if items:
        source["items"] = [{"key": key, "path": key} for key in items]
    return {"name": name, "configMap": source}


#: Key and mount path of an operand's entrypoint script.
_ENTRYPOINT_KEY = "entrypoint.sh"
_ENTRYPOINT_PATH = "/bin/entrypoint.sh"


def entrypoint_config_map(ctx: Ctx, name: str, script: str, *, app: str) -> dict[str, Any]:
    """The ConfigMap holding an operand's entrypoint script.

    The device plugin and the toolkit start through a script of ours (wait for the driver,
    then exec the image's binary) rather than the image's own entrypoint; the ConfigMap,
    its volume and its mount share `name`.
    """
    return config_map(ctx, name, {_ENTRYPOINT_KEY: script}, labels={"app": app})


def entrypoint_mount(name: str) -> dict[str, Any]:
    """The entrypoint script at `/bin/entrypoint.sh` (subPath: the rest of `/bin` stays)."""
    return mount(name, _ENTRYPOINT_PATH, read_only=True, sub_path=_ENTRYPOINT_KEY)


def entrypoint_volume(name: str) -> dict[str, Any]:
    """The entrypoint ConfigMap as a volume, mode 0700 so the script can be executed."""
    return config_map_volume(name, name, mode=0o700)


PRIVILEGED: Mapping[str, Any] = {"privileged": True}


def wait_for_file(ctx: Ctx, name: str, ready_file: str, what: str) -> dict[str, Any]:
    """An init container that waits until `/run/nvidia/validations/<ready_file>` exists."""
    path = f"{VALIDATIONS_DIR}/{ready_file}"
    return {
        "name": name,
        "image": ctx.validator_image,
        "imagePullPolicy": pull_policy(ctx.spec.validator),
        "command": ["sh", "-c"],
        "args": [f"until [ -f {path} ]; do echo waiting for {what}; sleep 5; done"],
        "securityContext": dict(PRIVILEGED),
        "volumeMounts": [
            mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer")
        ],
    }


def driver_location_env(ctx: Ctx) -> list[dict[str, Any]]:
    """Where a driver validation finds the driver and the host's root, set only when the
    policy moves them from the validator's own defaults (`/run/nvidia/driver`, `/`)."""
    out: list[dict[str, Any]] = []
    if ctx.driver_install_dir != DEFAULT_DRIVER_INSTALL_DIR:
        out += [
            env("DRIVER_INSTALL_DIR", ctx.driver_install_dir),
            env("DRIVER_INSTALL_DIR_CTR_PATH", ctx.driver_install_dir),
        ]
    if ctx.host_root != "/":
        out.append(env("HOST_ROOT", ctx.host_root))
    return out


def toolkit_validation(ctx: Ctx) -> dict[str, Any]:
    """The init container every GPU client waits behind: `toolkit-ready`."""
    return wait_for_file(
        ctx, "toolkit-validation", "toolkit-ready", "the NVIDIA container stack to be set up"
    )


def validations_volume() -> dict[str, Any]:
    return host_path("run-nvidia-validations", VALIDATIONS_DIR, "DirectoryOrCreate")


# --- pods and DaemonSets ----------------------------------------------------------------


def tolerations(spec: ClusterPolicySpec) -> list[dict[str, Any]]:
    """`daemonsets.tolerations`, plus the `nvidia.com/gpu` NoSchedule one if missing."""
    out = [t.to_dict() for t in spec.daemonsets.tolerations]
    if not any(
        t.get("key") == GPU_TOLERATION["key"]
        and t.get("operator", "Equal") == "Exists"
        and t.get("effect", "") in ("", "NoSchedule")
        for t in out
    ):
        out.append(dict(GPU_TOLERATION))
    return out


def pull_secrets(*specs: ImageSpec) -> list[dict[str, str]]:
    names: list[str] = []
    for spec in specs:
        for secret in spec.image_pull_secrets:
            if secret not in names:
                names.append(secret)
    return [{"name": n} for n in names]


def pod_spec(
    ctx: Ctx,
    *,
    account: str,
    deploy: str,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    init_containers: Sequence[dict[str, Any]] = (),
    images: Sequence[ImageSpec] = (),
    node_selector: Mapping[str, str] | None = None,
    runtime_class: bool = False,
    host_pid: bool = False,
) -> dict[str, Any]:
    """A pod spec with what every operand pod has: node selector on the deploy label,
    tolerations, priority class, service account, pull secrets."""
    selector = {deploy: "true"}
    selector.update(node_selector or {})
    spec: dict[str, Any] = {
        "nodeSelector": selector,
        "tolerations": tolerations(ctx.spec),
        "priorityClassName": ctx.spec.daemonsets.priority_class_name or DEFAULT_PRIORITY_CLASS,
        "serviceAccountName": account,
    }
    if host_pid:
        spec["hostPID"] = True
    if runtime_class:
        spec["runtimeClassName"] = ctx.runtime_class
    secrets = pull_secrets(*images)
    if secrets:
        spec["imagePullSecrets"] = secrets
    if init_containers:
        spec["initContainers"] = list(init_containers)
    spec["containers"] = containers
    spec["volumes"] = volumes
    return spec


def _max_unavailable(value: int | str) -> int | str:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def update_strategy(ctx: Ctx) -> dict[str, Any]:
    daemonsets = ctx.spec.daemonsets
    if daemonsets.update_strategy == "OnDelete":
        return {"type": "OnDelete"}
    return {
        "type": "RollingUpdate",
        "rollingUpdate": {
            "maxUnavailable": _max_unavailable(daemonsets.rolling_update.max_unavailable)
        },
    }


#: Pod labels the user may not override (the DaemonSet selector is immutable).
_RESERVED_POD_LABELS = frozenset({"app", "app.kubernetes.io/part-of"})


def daemonset(
    ctx: Ctx,
    name: str,
    pod: dict[str, Any],
    *,
    selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    strategy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A DaemonSet whose pods carry `app: <name>` (plus `selector`), the operator's labels,
    `daemonsets.labels/annotations` and the operand's own pod labels/annotations."""
    match = {"app": name, **(selector or {})}
    object_labels = {**match, **(labels or {})}
    template_labels: dict[str, str] = {}
    for key, value in {**ctx.spec.daemonsets.labels, **(pod_labels or {})}.items():
        if key not in _RESERVED_POD_LABELS:
            template_labels[key] = value
    template_labels.update(ctx.labels(object_labels))
    annotations = {**ctx.spec.daemonsets.annotations, **(pod_annotations or {})}
    template_meta: dict[str, Any] = {"labels": template_labels}
    if annotations:
        template_meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": ctx.meta(name, labels=object_labels),
        "spec": {
            "selector": {"matchLabels": match},
            "updateStrategy": dict(strategy) if strategy is not None else update_strategy(ctx),
            "template": {"metadata": template_meta, "spec": pod},
        },
    }


def prometheus_scrape(port: int) -> dict[str, str]:
    """Service annotations for Prometheus setups that discover targets by annotation
    rather than by ServiceMonitor."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}


def service(
    ctx: Ctx,
    name: str,
    *,
    port: int,
    port_name: str,
    selector: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
    type_: str = "",
    internal_traffic_policy: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": dict(selector),
        "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        "type": type_ or "ClusterIP",
    }
    if internal_traffic_policy:
        spec["internalTrafficPolicy"] = internal_traffic_policy
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": ctx.meta(name, labels={"app": name}, annotations=annotations),
        "spec": spec,
    }


def service_monitor(
    ctx: Ctx,
    app: str,
    endpoint: Mapping[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A prometheus-operator ServiceMonitor for the Service `app` (the metrics exporters';
    the caller checks that the CRD is installed)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": ctx.meta(app, labels={**(labels or {}), "app": app}),
        "spec": {
            "endpoints": [dict(endpoint)],
            "jobLabel": "app",
            "namespaceSelector": {"matchNames": [ctx.namespace]},
            "selector": {"matchLabels": {"app": app}},
        },
    }


__all__ = [
    "COMPONENT_LABEL",
    "DEPLOY_LABEL_PREFIX",
    "GPU_TOLERATION",
    "LABEL_KERNEL",
    "LABEL_OS_ID",
    "LABEL_OS_VERSION",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "VALIDATIONS_DIR",
    "BaseOperand",
    "ClusterView",
    "Ctx",
    "GPUNode",
    "Operand",
    "Rendered",
    "deploy_label",
    "name_list",
    "safe_name",
    "short_hash",
    "wants_operand",
]
