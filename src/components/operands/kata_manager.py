"""`state-kata-manager`: installs the Kata Containers runtime classes a policy lists
(`kataManager.config.runtimeClasses`: their artifacts pulled into
`kataManager.config.artifactsDir`) and configures the node's container runtime for them,
on `vm-passthrough` nodes once the GPUs are bound to `vfio-pci`. Its configuration is a
ConfigMap of ours; a change of it restarts the pods (a hash of it in the pod template).
Each runtime class is also a RuntimeClass of the same name and handler, scheduling its pods
onto the Kata manager's nodes (or the runtime class's own `nodeSelector`). On while
`sandboxWorkloads.enabled` and `kataManager.enabled`.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.api import KataRuntimeClassSpec, OperandImage
from components.operands._context import Ctx
from components.operands._contract import VM_PASSTHROUGH, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._names import deploy_label, short_hash
from components.operands._pods import (
    VALIDATIONS_DIR,
    config_map_volume,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._runtime import detect_runtime
from components.operands._runtime_config import runtime_config
from components.operands._sandbox import privileged_s0
from components.operands._workloads import (
    config_map,
    entrypoint_config_map,
    entrypoint_mount,
    entrypoint_volume,
)

DEPLOY_LABEL = deploy_label("kata-manager")
APP = "nvidia-kata-manager"
CONFIG = "nvidia-kata-manager-config"
ENTRYPOINT = "nvidia-kata-manager-entrypoint"
CONFIG_PATH = "/etc/kata-manager/config.yaml"
#: Pod annotation with a hash of the configuration, so a change rolls the pods.
CONFIG_HASH_ANNOTATION = "nvidia.com/kata-manager.last-applied-hash"

_ENTRYPOINT = f"""#!/bin/bash
# With CDI the GPUs must be bound to vfio-pci before Kata can be given them.
if [[ "${{CDI_ENABLED}}" == "true" ]]; then
  until [[ -f {VALIDATIONS_DIR}/vfio-pci-ready ]]; do
    echo "waiting for the GPUs to be bound to vfio-pci"
    sleep 5
  done
fi
exec k8s-kata-manager
"""

#: Ready once the manager has written its PID file and that process lives.
_READY = (
    'pid_file="${KATA_ARTIFACTS_DIR}/k8s-kata-manager.pid"; '
    '[ -f "$pid_file" ] && [ -d "/proc/$(cat "$pid_file")" ]'
)


def runtime_class(ctx: Ctx, spec: KataRuntimeClassSpec) -> dict[str, Any]:
    """The RuntimeClass a Kata pod names to run in a VM of this runtime class."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": ctx.meta(
            spec.name,
            namespaced=False,
            labels={
                "app.kubernetes.io/component": "gpu-operator",
                "nvidia.com/kata-runtime-class": "true",
            },
        ),
        "handler": spec.name,
        "scheduling": {"nodeSelector": dict(spec.node_selector) or {DEPLOY_LABEL: "true"}},
    }


class KataManager(DeclaredOperand):
    """The Kata manager DaemonSet, its ConfigMaps, ServiceAccount and RBAC."""

    key = "kata-manager"
    app = APP
    deploy_label = DEPLOY_LABEL
    workloads = frozenset({VM_PASSTHROUGH})
    image = OperandImage.KATA_MANAGER
    rules = (rule([""], ["pods"], ["get", "list", "watch"]),)
    cluster_rules = (rule([""], ["nodes"], ["get", "list"]),)
    sandbox = True

    def always(self, ctx: Ctx) -> list[dict[str, Any]]:
        """Its config and entrypoint ConfigMaps and the RuntimeClasses it configures."""
        runtime_classes = ctx.spec.kata_manager.config.runtime_classes
        return [
            config_map(ctx, CONFIG, {"config.yaml": _settings(ctx)}, labels={"app": APP}),
            entrypoint_config_map(ctx, ENTRYPOINT, _ENTRYPOINT, app=APP),
            *(runtime_class(ctx, rc) for rc in runtime_classes),
        ]

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        spec = ctx.spec.kata_manager
        artifacts = spec.config.artifacts_dir
        envs = [
            env_field("NODE_NAME", "spec.nodeName"),
            env("CONFIG_FILE", CONFIG_PATH),
            env("LOAD_KERNEL_MODULES", "true"),
            env("CDI_ENABLED", "true"),
            env("KATA_ARTIFACTS_DIR", artifacts),
        ]
        envs = merge_env(envs, spec.env)
        runtime_mounts, runtime_volumes = runtime_config(detect_runtime(ctx.view.gpu_nodes), envs)
        main = _manager(artifacts, runtime_mounts)
        volumes = [
            entrypoint_volume(ENTRYPOINT),
            config_map_volume(CONFIG, CONFIG, mode=0o700),
            host_path("host-root", ctx.host_root),
            host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            validations_volume(),
            host_path("kata-artifacts", artifacts, "DirectoryOrCreate"),
            *runtime_volumes,
        ]
        annotations = {
            # The manager reaches the host's GPUs through CDI, not through a device plugin.
            f"nvidia.cdi.k8s.io/container.{APP}": "management.nvidia.com/gpu=all",
            CONFIG_HASH_ANNOTATION: short_hash(_settings(ctx)),
        }
        pod = Pod(
            main,
            volumes,
            env=envs,
            user_env=False,
            host_pid=True,
            extra={"terminationGracePeriodSeconds": 30},
            pod_annotations=annotations,
        )
        return [self.daemonset(ctx, image, pod)]


def _manager(artifacts: str, runtime_mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The manager container: it starts once the GPUs are bound to vfio-pci (with CDI) and
    is ready while its process lives."""
    return {
        "name": APP,
        "command": ["/bin/sh", "-c"],
        "args": ["/bin/entrypoint.sh"],
        "securityContext": privileged_s0(),
        "volumeMounts": [
            entrypoint_mount(ENTRYPOINT),
            mount(CONFIG, CONFIG_PATH, sub_path="config.yaml"),
            mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
            mount("cdi-root", "/var/run/cdi"),
            mount("run-nvidia-validations", VALIDATIONS_DIR),
            mount("kata-artifacts", artifacts),
            *runtime_mounts,
        ],
        "readinessProbe": {
            "exec": {"command": ["sh", "-c", _READY]},
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
        },
    }


def _settings(ctx: Ctx) -> str:
    """The manager's config, written out in full: the policy's own form leaves defaults
    unsaid, the manager needs the artifacts directory spelled out."""
    config = ctx.spec.kata_manager.config
    settings = {
        "artifactsDir": config.artifacts_dir,
        "runtimeClasses": [rc.to_dict() for rc in config.runtime_classes],
    }
    return yaml.safe_dump(settings, sort_keys=True, default_flow_style=False)
