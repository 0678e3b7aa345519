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
from components.operands._context import BaseOperand, Ctx, image_or_condition
from components.operands._contract import CONTAINER, Rendered
from components.operands._names import deploy_label
from components.operands._pods import (
    AS_ROOT,
    VALIDATIONS_DIR,
    apply_component,
    build_pod_spec,
    driver_location_env,
    env,
    env_field,
    host_path,
    merge_env,
    mount,
    pull_policy,
    validations_volume,
)
from components.operands._rbac import account_and_rbac, rule
from components.operands._validation import PART_OF, validation_step
from components.operands._workloads import daemonset

NAME = "state-operator-validation"
DEPLOY_LABEL = deploy_label("operator-validator")
APP = "nvidia-operator-validator"
ACCOUNT = "nvidia-operator-validator"


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


class Validator(BaseOperand):
    """The operator validator DaemonSet, its ServiceAccount and RBAC."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({CONTAINER})

    def enabled(self, policy: ClusterPolicy) -> bool:
        """Always on, as in the reference: the other operands wait for its files."""
        return True

    def _render(self, ctx: Ctx) -> Rendered:
        spec = ctx.spec
        validator = spec.validator
        rendered = Rendered(
            objects=account_and_rbac(
                ctx,
                ACCOUNT,
                rules=[
                    rule([""], ["pods"], ["get", "list", "watch", "create", "delete"]),
                    rule(["apps"], ["daemonsets"], ["get", "list"]),
                ],
                cluster_rules=[rule([""], ["nodes"], ["get", "list", "watch"])],
            )
        )
        image = image_or_condition(ctx, OperandImage.OPERATOR_VALIDATOR, rendered)
        if image is None:
            return rendered

        steps = [
            validation_step(
                ctx,
                image,
                "driver",
                [
                    env("WITH_WAIT", "true"),
                    env_field("OPERATOR_NAMESPACE", "metadata.namespace"),
                    *driver_location_env(ctx),
                ],
                validator.driver.env,
                [
                    mount(
                        "driver-install-dir", ctx.driver_install_dir, propagation="HostToContainer"
                    ),
                    mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
                    mount("host-dev-char", "/host-dev-char"),
                ],
            ),
            validation_step(
                ctx,
                image,
                "toolkit",
                # The runtime hands it the GPUs, which is what it checks.
                [env("NVIDIA_VISIBLE_DEVICES", "all"), env("WITH_WAIT", "false")],
                validator.toolkit.env,
            ),
            validation_step(ctx, image, "cuda", _workload_env(ctx, image), validator.cuda.env),
        ]
        if spec.device_plugin.enabled:
            steps.append(
                validation_step(
                    ctx,
                    image,
                    "plugin",
                    [
                        env("WITH_WORKLOAD", "false"),
                        env("MIG_STRATEGY", spec.mig.strategy),
                        *_workload_env(ctx, image),
                    ],
                    validator.plugin.env,
                )
            )
        main = apply_component(
            {
                "name": "nvidia-operator-validator",
                "image": image,
                "imagePullPolicy": pull_policy(validator),
                "command": ["sh", "-c"],
                "args": ["echo all validations are successful; sleep infinity"],
                "securityContext": dict(AS_ROOT),
                "lifecycle": {
                    "preStop": {
                        "exec": {"command": ["/bin/sh", "-c", f"rm -f {VALIDATIONS_DIR}/*-ready"]}
                    }
                },
                "volumeMounts": [
                    mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="Bidirectional")
                ],
            },
            validator,
        )
        if validator.env:
            main["env"] = merge_env([], validator.env)
        pod = build_pod_spec(
            ctx,
            host_network=ctx.spec.validator.host_network,
            account=ACCOUNT,
            deploy=DEPLOY_LABEL,
            init_containers=steps,
            containers=[main],
            volumes=[
                validations_volume(),
                host_path("driver-install-dir", ctx.driver_install_dir),
                host_path("host-root", ctx.host_root),
                host_path("host-dev-char", f"{ctx.host_root.rstrip('/')}/dev/char"),
            ],
            images=[validator],
            runtime_class=True,
        )
        # The toolkit validation checks that a management container gets the GPUs.
        annotations = ctx.management_annotations("toolkit-validation")
        rendered.objects.append(
            daemonset(ctx, APP, pod, selector=PART_OF, pod_annotations=annotations)
        )
        return rendered
