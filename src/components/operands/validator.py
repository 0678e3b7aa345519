"""`state-operator-validation`: the validator checks each layer on each node, in order, and
writes the files the other operands wait for in `/run/nvidia/validations`:

`driver-validation` (driver loaded, or a preinstalled host driver: `driver-ready`) ->
`toolkit-validation` (`toolkit-ready`) -> `cuda-validation` (a CUDA workload pod runs:
`cuda-ready`) -> `plugin-validation` (the device plugin advertises GPUs: `plugin-ready`;
only when the device plugin is enabled). Its main container only sleeps; its readiness
means "this node's GPU stack works".

`validator.env` goes to the main container; `validator.{driver,toolkit,cuda,plugin}.env`
to each validation step.
"""

from __future__ import annotations

from typing import Any

from components.api import ClusterPolicy, OperandImage
from components.operands._context import Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._declared import DeclaredOperand, Pod
from components.operands._pods import (
    AS_ROOT,
    driver_location_env,
    env,
    env_field,
    host_path,
    mount,
    validations_volume,
)
from components.operands._rbac import rule
from components.operands._validation import PART_OF, validation_step, validator_main


def _workload_env(ctx: Ctx, image: str) -> list[dict[str, Any]]:
    """What the cuda and plugin steps need to start their test pods."""
    validator = ctx.spec.validator
    out = [
        env("WITH_WAIT", "false"),
        env_field("NODE_NAME", "spec.nodeName"),
        env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
        env("VALIDATOR_IMAGE", image),
        # Empty unless the policy sets one: the test pods then take the validator's default.
        env("VALIDATOR_IMAGE_PULL_POLICY", validator.image_pull_policy or ""),
    ]
    if ctx.uses_runtime_class:
        # The test pods run as the validator's own pod does.
        out.append(env("VALIDATOR_RUNTIME_CLASS", ctx.runtime_class))
    if validator.image_pull_secrets:
        out.append(env("VALIDATOR_IMAGE_PULL_SECRETS", ",".join(validator.image_pull_secrets)))
    return out


class Validator(DeclaredOperand):
    """The operator validator DaemonSet, its ServiceAccount and RBAC."""

    key = "operator-validator"
    name = "state-operator-validation"
    workloads = frozenset({CONTAINER})
    image = OperandImage.OPERATOR_VALIDATOR
    rules = (
        rule([""], ["pods"], ["get", "list", "watch", "create", "delete"]),
        rule(["apps"], ["daemonsets"], ["get", "list"]),
    )
    cluster_rules = (rule([""], ["nodes"], ["get", "list", "watch"]),)

    def enabled(self, policy: ClusterPolicy) -> bool:
        """Always on, as in the reference: the other operands wait for its files."""
        return True

    def workload(self, ctx: Ctx, image: str, rendered: Rendered) -> list[dict[str, Any]]:
        main = validator_main("nvidia-operator-validator", AS_ROOT, "*-ready")
        volumes = [
            validations_volume(),
            host_path("driver-install-dir", ctx.driver_install_dir),
            host_path("host-root", ctx.host_root),
            host_path("host-dev-char", f"{ctx.host_root.rstrip('/')}/dev/char"),
        ]
        pod = Pod(
            main,
            volumes,
            init_containers=_steps(ctx, image),
            runtime_class=True,
            # The toolkit validation checks that a management container gets the GPUs.
            gpu_container="toolkit-validation",
            selector=PART_OF,
        )
        return [self.daemonset(ctx, image, pod)]


def _steps(ctx: Ctx, image: str) -> list[dict[str, Any]]:
    """driver -> toolkit -> cuda (-> plugin, with the device plugin on)."""
    spec = ctx.spec
    validator = spec.validator
    driver_env = [
        env("WITH_WAIT", "true"),
        env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
        *driver_location_env(ctx),
    ]
    driver_mounts = [
        mount("driver-install-dir", ctx.driver_install_dir, propagation="HostToContainer"),
        mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
        mount("host-dev-char", "/host-dev-char"),
    ]
    # The runtime hands the toolkit step the GPUs, which is what it checks.
    toolkit_env = [env("NVIDIA_VISIBLE_DEVICES", "all"), env("WITH_WAIT", "false")]
    steps = [
        validation_step(ctx, image, "driver", driver_env, validator.driver.env, driver_mounts),
        validation_step(ctx, image, "toolkit", toolkit_env, validator.toolkit.env),
        validation_step(ctx, image, "cuda", _workload_env(ctx, image), validator.cuda.env),
    ]
    if spec.device_plugin.enabled:
        plugin_env = [
            env("WITH_WORKLOAD", "false"),
            env("MIG_STRATEGY", spec.mig.strategy),
            *_workload_env(ctx, image),
        ]
        steps.append(validation_step(ctx, image, "plugin", plugin_env, validator.plugin.env))
    return steps
