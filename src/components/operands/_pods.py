"""Builders for what goes into an operand's pod: env, mounts, volumes, the init containers
that wait for the driver stack, and the pod spec every operand pod shares."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.api import (
    ClusterPolicySpec,
    ComponentSpec,
    EnvVar,
    ImageSpec,
    ResourceRequirements,
)
from components.operands._context import DEFAULT_DRIVER_INSTALL_DIR, Ctx

VALIDATIONS_DIR = "/run/nvidia/validations"
DEFAULT_PRIORITY_CLASS = "system-node-critical"

#: Every operand pod tolerates the GPU taint, whatever `daemonsets.tolerations` adds.
GPU_TOLERATION: Mapping[str, str] = {
    "key": "nvidia.com/gpu",
    "operator": "Exists",
    "effect": "NoSchedule",
}

# --- containers ---------------------------------------------------------------------


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


PRIVILEGED: Mapping[str, Any] = {"privileged": True}


RUN_NVIDIA = "/run/nvidia"
#: Init containers run as root: the validator's image (the operator's, distroless) runs
#: as non-root, and these read and write under /run/nvidia on the host.
AS_ROOT: Mapping[str, Any] = {"privileged": True, "runAsUser": 0}


def wait_for_file(
    ctx: Ctx,
    name: str,
    ready_file: str,
    what: str,
    *,
    whole_run_nvidia: bool = False,
    env_overrides: Sequence[EnvVar] = (),
) -> dict[str, Any]:
    """An init container that waits until `/run/nvidia/validations/<ready_file>` exists.
    It mounts the validations folder, or with `whole_run_nvidia` all of /run/nvidia (volume
    `run_nvidia_volume()`), as the reference's manifest for that operand does;
    `env_overrides` (the validator's step env) becomes its env."""
    path = f"{VALIDATIONS_DIR}/{ready_file}"
    if whole_run_nvidia:
        mounted = mount("run-nvidia", RUN_NVIDIA, propagation="HostToContainer")
    else:
        mounted = mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="HostToContainer")
    return {
        "name": name,
        "image": ctx.validator_image,
        "imagePullPolicy": pull_policy(ctx.spec.validator),
        "command": ["sh", "-c"],
        "args": [f"until [ -f {path} ]; do echo waiting for {what}; sleep 5; done"],
        "securityContext": dict(AS_ROOT),
        "volumeMounts": [mounted],
        **({"env": merge_env([], env_overrides)} if env_overrides else {}),
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


def toolkit_validation(ctx: Ctx, *, whole_run_nvidia: bool = False) -> dict[str, Any]:
    """The init container every GPU client waits behind: `toolkit-ready`. It takes
    `validator.toolkit.env`, as every toolkit validation does in the reference."""
    return wait_for_file(
        ctx,
        "toolkit-validation",
        "toolkit-ready",
        "the NVIDIA container stack to be set up",
        whole_run_nvidia=whole_run_nvidia,
        env_overrides=ctx.spec.validator.toolkit.env,
    )


def validations_volume() -> dict[str, Any]:
    return host_path("run-nvidia-validations", VALIDATIONS_DIR, "DirectoryOrCreate")


def run_nvidia_volume(kind: str = "Directory") -> dict[str, Any]:
    """/run/nvidia, which the driver container (or a host driver's validation) has made;
    `kind` "" leaves the hostPath type unset, as the reference's DCGM exporter does."""
    return host_path("run-nvidia", RUN_NVIDIA, kind or None)


# --- the pod ----------------------------------------------------------------------------


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


def build_pod_spec(
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
    host_ipc: bool = False,
    host_network: bool = False,
) -> dict[str, Any]:
    """A pod spec with what every operand pod has: node selector on the deploy label,
    tolerations, priority class, service account, pull secrets, and the policy's
    `daemonsets.podSecurityContext`. `runtime_class` asks for the GPU management
    RuntimeClass, which the pod names only where the runtime mode has one (see
    `Ctx.uses_runtime_class`). `host_network` (the operand's `hostNetwork`) also sets
    `dnsPolicy: ClusterFirstWithHostNet`, so the pod still resolves cluster names."""
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
    if host_ipc:
        spec["hostIPC"] = True
    if host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    security = ctx.spec.daemonsets.pod_security_context
    if security is not None and (given := security.to_dict()):
        spec["securityContext"] = given
    if runtime_class and ctx.uses_runtime_class:
        spec["runtimeClassName"] = ctx.runtime_class
    secrets = pull_secrets(*images)
    if secrets:
        spec["imagePullSecrets"] = secrets
    if init_containers:
        spec["initContainers"] = list(init_containers)
    spec["containers"] = containers
    spec["volumes"] = volumes
    return spec


def tell_host_root(ctx: Ctx, pod: dict[str, Any]) -> None:
    """A pod that mounts the host's root (volume `host-root`) is told in every container
    where that root is, when `hostPaths.rootFS` moves it, as the reference does."""
    if ctx.host_root == "/" or not any(v["name"] == "host-root" for v in pod["volumes"]):
        return
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        set_env(container.setdefault("env", []), "HOST_ROOT", ctx.host_root)
