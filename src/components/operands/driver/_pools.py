"""Which driver DaemonSets exist: GPU nodes grouped by what picks their driver image (OS
release, and kernel when precompiled), each group named as the reference names it."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from components.api import (
    DRIVER_KERNEL_PIN_LABEL,
    KERNEL_LABEL,
    OS_ID_LABEL,
    OS_VERSION_LABEL,
)
from components.operands._contract import GPUNode
from components.operands._names import deploy_label, nodes_phrase, safe_name, wants_operand

DEPLOY_LABEL = deploy_label("driver")
APP = "nvidia-driver-daemonset"
"""The reference's name of the driver DaemonSet and the `app` label of every driver pod."""
APP_PREFIX = APP

_ARCH = re.compile(r"x86_64(?:_64k)?|aarch64(?:_64k)?")


def sanitize_kernel(kernel: str) -> str:
    """A kernel version as it appears in names and label values: no architecture suffix,
    `_` as `.`, lower case, valid and at most 63 characters
    (`5.14.0-427.13.1.el9_4.x86_64` -> `5.14.0-427.13.1.el9.4`)."""
    cleaned = _ARCH.sub("", kernel).replace("_", ".").rstrip(".").lower()
    return safe_name(cleaned)


@dataclass(frozen=True)
class DriverPool:
    """GPU nodes that share one driver DaemonSet (same OS release, same kernel if
    precompiled)."""

    os_id: str
    os_version: str
    kernel: str | None
    nodes: tuple[str, ...]

    @property
    def release(self) -> str:
        """`<ID><VERSION_ID>`, e.g. `ubuntu22.04`, `rhel9.4`."""
        return f"{self.os_id}{self.os_version}"

    @property
    def node_selector(self) -> dict[str, str]:
        selector = {OS_ID_LABEL: self.os_id, OS_VERSION_LABEL: self.os_version}
        if self.kernel is not None:
            selector[DRIVER_KERNEL_PIN_LABEL] = self.kernel
        return selector

    def base_name(self) -> str:
        if self.kernel is None:
            return f"{APP_PREFIX}-{self.release}"
        return f"{APP_PREFIX}-{sanitize_kernel(self.kernel)}-{self.release}"


def driver_pools(
    nodes: Sequence[GPUNode], *, precompiled: bool
) -> tuple[list[tuple[str, DriverPool]], list[tuple[str, str]]]:
    """Group GPU nodes into driver DaemonSets: `[(daemonset name, pool)]`, sorted by name,
    and the conditions for nodes that fit no group.

    The only DaemonSet of a single-OS cluster (not precompiled) has the reference's name,
    `nvidia-driver-daemonset`; a second OS gives each its own."""
    groups: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
    no_os: list[str] = []
    no_kernel: list[str] = []
    for node in nodes:
        if not wants_operand(node, DEPLOY_LABEL):
            continue
        if not node.kernel and not (precompiled and node.pinned_kernel):
            no_kernel.append(node.name)
        if not node.os_id or not node.os_version:
            no_os.append(node.name)
            continue
        if not precompiled:
            groups[(node.os_id, node.os_version, None)].append(node.name)
            continue
        # The kernel it runs (where it is going) and the one it is pinned to (where its
        # driver runs now); the same one but for a node between kernels.
        for kernel in dict.fromkeys(k for k in (node.kernel, node.pinned_kernel) if k):
            groups[(node.os_id, node.os_version, kernel)].append(node.name)
    pools = [
        DriverPool(os_id, os_version, kernel, tuple(sorted(names)))
        for (os_id, os_version, kernel), names in groups.items()
    ]
    # Names must be unique: two groups whose names sanitize to the same string (kernels
    # that differ only by architecture or case) get a hash of what sets them apart.
    by_name: dict[str, list[DriverPool]] = defaultdict(list)
    for pool in pools:
        by_name[safe_name(pool.base_name())].append(pool)
    named: list[tuple[str, DriverPool]] = []
    for name, same in by_name.items():
        if len(same) == 1:
            named.append((name, same[0]))
            continue
        for pool in same:
            key = f"{pool.os_id}/{pool.os_version}/{pool.kernel}"
            named.append((safe_name(pool.base_name(), unique_by=key), pool))
    named.sort(key=lambda item: item[0])
    if len(named) == 1 and named[0][1].kernel is None:
        named = [(APP, named[0][1])]

    conditions: list[tuple[str, str]] = []
    if no_os:
        conditions.append(
            (
                "OSLabelsMissing",
                f"{nodes_phrase(no_os)} no {OS_ID_LABEL} / {OS_VERSION_LABEL} label, so no "
                "driver DaemonSet selects them (is node-feature-discovery running there?)",
            )
        )
    if no_kernel:
        consequence = (
            ", so no precompiled driver DaemonSet selects them"
            if precompiled
            else " (is node-feature-discovery running there?)"
        )
        conditions.append(
            (
                "KernelLabelMissing",
                f"{nodes_phrase(no_kernel)} no {KERNEL_LABEL} label{consequence}",
            )
        )
    return named, conditions
