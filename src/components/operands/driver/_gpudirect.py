"""The GPUDirect sidecars of a driver pod: `nvidia-fs-ctr` (GPUDirect Storage, `gds`) and
`nvidia-gdrcopy-ctr` (GDRCopy, `gdrcopy`).

Each builds and loads its kernel module (`nvidia_fs`, `gdrdrv`) against the driver the
pod's driver container installed, so it waits for that driver, and its image is built per
OS like the driver's: `<repository>/<image>:<version>-<ostag>` (`nvidia-fs:2.29.4-ubuntu22.04`).
Neither has precompiled images: with `driver.usePrecompiled: true` a condition says so and
the pod runs without the sidecar, where the reference stops rendering the whole driver
DaemonSet. The sidecars see the same package repositories, certificates and secret env as
the driver container (they install packages too) and take `driver.resources`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.api import DriverSideSpec, ImageError, OperandImage, driver_side_image
from components.operands._context import Ctx
from components.operands._contract import Rendered
from components.operands._names import name_list
from components.operands._pods import merge_env, mount, pull_policy, resources
from components.operands.driver._pools import DriverPool


@dataclass(frozen=True)
class _Sidecar:
    field: str  # the policy section
    what: str  # in messages
    container: str
    operand: OperandImage
    installer: str  # the image's command that builds and loads the module
    module: str  # the kernel module it loads


_SIDECARS: Sequence[_Sidecar] = (
    _Sidecar("gds", "GPUDirect Storage", "nvidia-fs-ctr", OperandImage.GDS,
             "nvidia-gds-driver", "nvidia_fs"),
    _Sidecar("gdrcopy", "GDRCopy", "nvidia-gdrcopy-ctr", OperandImage.GDRCOPY,
             "nvidia-gdrcopy-driver", "gdrdrv"),
)  # fmt: skip

#: Ready once the driver container has installed the driver and loaded its module.
_WAIT_FOR_DRIVER = (
    "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do "
    "echo Waiting for nvidia-driver to be installed...; sleep 10; done; "
)


def _sections(ctx: Ctx) -> list[tuple[_Sidecar, DriverSideSpec]]:
    """The sidecars the policy switches on."""
    specs = [(s, getattr(ctx.spec, s.field)) for s in _SIDECARS]
    return [(sidecar, spec) for sidecar, spec in specs if spec.enabled]


def gpudirect_specs(ctx: Ctx) -> list[DriverSideSpec]:
    """The sections whose images the driver pod pulls (for their pull secrets)."""
    if ctx.spec.driver.use_precompiled:
        return []
    return [spec for _, spec in _sections(ctx)]


def gpudirect_containers(
    ctx: Ctx,
    pool: DriverPool,
    package_mounts: Sequence[dict[str, Any]],
    env_from: Sequence[dict[str, Any]],
    rendered: Rendered,
) -> list[dict[str, Any]]:
    """The sidecars for one pool's pods; problems become conditions on `rendered`."""
    out: list[dict[str, Any]] = []
    for sidecar, spec in _sections(ctx):
        if ctx.spec.driver.use_precompiled:
            rendered.conditions.append(
                (
                    "GPUDirectUnsupported",
                    f"{sidecar.field}.enabled: {sidecar.what} ({sidecar.container}) has no "
                    "precompiled images, so driver pods run without it while "
                    "driver.usePrecompiled is true; turn one of them off",
                )
            )
            continue
        try:
            image = driver_side_image(
                spec,
                sidecar.operand,
                os_id=pool.os_id,
                os_version=pool.os_version,
                env=ctx.view.image_env,
            )
        except ImageError as exc:
            rendered.conditions.append(
                (
                    "GPUDirectImageInvalid",
                    f"no {sidecar.field} image for nodes {name_list(pool.nodes)}: {exc}",
                )
            )
            continue
        out.append(_container(ctx, sidecar, spec, image, package_mounts, env_from))
    return out


def _container(
    ctx: Ctx,
    sidecar: _Sidecar,
    spec: DriverSideSpec,
    image: str,
    package_mounts: Sequence[dict[str, Any]],
    env_from: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": sidecar.container,
        "image": image,
        "imagePullPolicy": pull_policy(spec),
        "command": ["bash", "-xc"],
        "args": [f"{_WAIT_FOR_DRIVER}exec {sidecar.installer} install"],
        "securityContext": {"privileged": True, "seLinuxOptions": {"level": "s0"}},
        "volumeMounts": [
            mount("run-nvidia", "/run/nvidia", propagation="HostToContainer"),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log", read_only=True),
            *package_mounts,
        ],
        "startupProbe": {
            "exec": {"command": ["sh", "-c", f"lsmod | grep {sidecar.module}"]},
            "initialDelaySeconds": 10,
            "failureThreshold": 120,
            "successThreshold": 1,
            "periodSeconds": 10,
            "timeoutSeconds": 10,
        },
    }
    if spec.env:
        container["env"] = merge_env([], spec.env)
    if env_from:
        container["envFrom"] = list(env_from)
    res = resources(ctx.spec.driver.resources)
    if res is not None:
        container["resources"] = res
    return container


def gpudirect_env(ctx: Ctx) -> list[tuple[str, str]]:
    """What the driver container is told about the sidecars beside it (its startup probe
    passes it on to the validator through `.driver-ctr-ready`)."""
    out = []
    if ctx.spec.gdrcopy.enabled:
        out.append(("GDRCOPY_ENABLED", "true"))
    if ctx.spec.gds.enabled:
        out.append(("GDS_ENABLED", "true"))
    return out
