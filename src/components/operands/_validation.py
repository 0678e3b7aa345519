"""The validation steps the operator validator and the sandbox validator both run: one
init container of `nvidia-validator` per component, and the label both validators' pods
carry. Shared here so that neither imports the other."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.api import EnvVar
from components.operands._context import Ctx
from components.operands._pods import AS_ROOT, VALIDATIONS_DIR, env, merge_env, mount, pull_policy

PART_OF = {"app.kubernetes.io/part-of": "gpu-operator"}
#: Validation steps that look at host-level state and need the host's SELinux level.
_HOST_LEVEL = frozenset({"driver", "vfio-pci", "vgpu-manager"})


def validation_step(
    ctx: Ctx,
    image: str,
    component: str,
    defaults: Sequence[dict[str, Any]],
    overrides: Iterable[EnvVar],
    mounts: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The init container that runs `nvidia-validator` for one `component` (the sandbox
    validator runs its steps the same way)."""
    validator = ctx.spec.validator
    return {
        "name": f"{component}-validation",
        "image": image,
        "imagePullPolicy": pull_policy(validator),
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": merge_env([env("COMPONENT", component), *defaults], overrides),
        "securityContext": {
            **AS_ROOT,
            **({"seLinuxOptions": {"level": "s0"}} if component in _HOST_LEVEL else {}),
        },
        "volumeMounts": [
            mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="Bidirectional"),
            *mounts,
        ],
    }


def validator_main(name: str, security: Mapping[str, Any], remove: str) -> dict[str, Any]:
    """A validator's main container: it only sleeps once its steps have passed (its
    readiness is theirs), and takes the files matching `remove` with it when it stops, so
    what waits on them waits again."""
    return {
        "name": name,
        "command": ["sh", "-c"],
        "args": ["echo all validations are successful; sleep infinity"],
        "securityContext": dict(security),
        "lifecycle": {
            "preStop": {"exec": {"command": ["/bin/sh", "-c", f"rm -f {VALIDATIONS_DIR}/{remove}"]}}
        },
        "volumeMounts": [
            mount("run-nvidia-validations", VALIDATIONS_DIR, propagation="Bidirectional")
        ],
    }
