"""`state-driver`: the NVIDIA driver, one DaemonSet per OS (and per kernel when precompiled).

Where the reference runs one `nvidia-driver-daemonset` whose image tag comes from the first
GPU node's OS (so a mixed-OS cluster pulls the wrong image on some nodes), we group the GPU
nodes by what picks their image and render one DaemonSet per group:

* **default**: one per OS release (`system-os_release.ID` + `VERSION_ID`), named
  `nvidia-driver-daemonset-<ID><VERSION_ID>` (`nvidia-driver-daemonset-ubuntu22.04`),
  selecting on both labels; image `<driver>:<version>-<ostag>`. On a single-OS cluster
  the only one has the reference's name, `nvidia-driver-daemonset`.
* **`usePrecompiled: true`**: one per (kernel, OS release), named as the reference names
  them, `nvidia-driver-daemonset-<kernel>-<ID><VERSION_ID>`, labelled
  `nvidia.com/precompiled=true`; image `<driver>:<branch>-<kernel>-<ostag>`. Where the
  reference selects on `kernel-version.full`, these select on the kernel the node is
  pinned to (`DRIVER_KERNEL_PIN_LABEL`, written by the upgrade controller), so a node that
  boots another kernel keeps its driver pod until it has been cordoned and cleared. One is
  rendered for every kernel a node runs or is pinned to: the new kernel's DaemonSet is
  there (and its image pulled) before the node moves to it.

The per-OS DaemonSets leave pinned nodes alone (a `DoesNotExist` node affinity on the pin),
so turning `usePrecompiled` on or off also moves each node by its pin, one node at a time
through the upgrade's safe path, while the DaemonSets of the old kind stay until no node
needs them. Every driver DaemonSet of ours also leaves alone a node that still runs the
reference operator's driver (`DRIVER_TAKEOVER_LABEL`, a takeover): the walk hands it over.

Selectors are exact node labels (never lists), so a DaemonSet's spec does not change when
nodes join or leave, and a node whose OS (or pinned kernel) label changes simply stops
matching one DaemonSet and starts matching another. A DaemonSet is rendered only for a
group some GPU node is in: the controller prunes the rest, so a DaemonSet goes away only
when no node selects it. GPU nodes without the labels get a condition naming them, and no
DaemonSet.

Names are Kubernetes DNS labels (kernel strings lose their architecture suffix and `_`
becomes `.`, as in the reference; anything longer than 63 characters is cut and hashed).
Every driver pod carries the reference's `app=nvidia-driver-daemonset` (runbooks select on
it); a per-OS DaemonSet's selector adds its OS release (and kernel), so selectors never
overlap. All share `app.kubernetes.io/component: nvidia-driver`, which the pod
anti-affinity uses so two driver pods never run on one node. Update strategy is always
`OnDelete`: the upgrade controller decides when a node's driver pod is replaced.
"""

from __future__ import annotations

from components.api import ClusterPolicy, ImageError, driver_image, pinned_image
from components.operands._context import BaseOperand, Ctx
from components.operands._contract import CONTAINER, Rendered
from components.operands._names import name_list
from components.operands.driver._daemonset import driver_daemonset, shared_objects
from components.operands.driver._pools import (
    DEPLOY_LABEL,
    DriverPool,
    driver_pools,
    sanitize_kernel,
)

NAME = "state-driver"


class Driver(BaseOperand):
    """The driver DaemonSets, their ServiceAccount, RBAC and startup-probe ConfigMap."""

    name: str = NAME
    deploy_label: str | None = DEPLOY_LABEL
    workloads = frozenset({CONTAINER})

    def enabled(self, policy: ClusterPolicy) -> bool:
        """On unless `driver.enabled: false`, or NVIDIADriver resources manage drivers
        (`driver.useNvidiaDriverCRD: true`)."""
        driver = policy.spec.driver
        return driver.enabled and not driver.use_nvidia_driver_crd

    def _render(self, ctx: Ctx) -> Rendered:
        driver = ctx.spec.driver
        view = ctx.view
        rendered = Rendered(objects=shared_objects(ctx))
        pools, conditions = driver_pools(view.gpu_nodes, precompiled=driver.use_precompiled)
        rendered.conditions.extend(conditions)
        for name, pool in pools:
            try:
                image = driver_image(
                    driver,
                    os_id=pool.os_id,
                    os_version=pool.os_version,
                    kernel=pool.kernel,
                    env=view.image_env,
                )
            except ImageError as exc:
                rendered.conditions.append(
                    (
                        "DriverImageInvalid",
                        f"no driver image for nodes {name_list(pool.nodes)}: {exc}",
                    )
                )
                continue
            # A rollback (issue 52) pins the DaemonSet back to its nodes' last good image.
            image = pinned_image(image, pool.nodes, view.last_good_images)
            rendered.objects.append(driver_daemonset(ctx, name, pool, image, rendered))
        # One condition per problem, however many DaemonSets ran into it.
        unique = list(dict.fromkeys(rendered.conditions))
        return Rendered(objects=rendered.objects, conditions=unique)


__all__ = ["Driver", "DriverPool", "driver_pools", "sanitize_kernel"]
