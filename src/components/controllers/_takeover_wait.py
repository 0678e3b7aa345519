"""What a takeover from NVIDIA's operator waits for, as the policy's status says it: the
nodes still on the reference's driver, and what moves them to ours (`_takeover`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from components.api import ClusterPolicy, names_and_more

CONDITION = "DriverTakeover"
"""The policy's condition (and its Events' reason) while nodes run the reference's driver."""
WALKING = "UpgradeWalk"
"""`CONDITION`'s reason when the upgrade walk moves the nodes (auto upgrade is on)."""
AUTO_UPGRADE_OFF = "AutoUpgradeOff"
"""`CONDITION`'s reason when the nodes wait for the admin."""
NAMED = 5
"""Nodes named in the message (the count says how many in all), as in `Ready`'s."""


@dataclass(frozen=True, slots=True)
class TakeoverWait:
    """The nodes still on the reference operator's driver, and what moves them to ours."""

    nodes: tuple[str, ...]
    """Sorted by name."""
    walks: bool
    """Driver auto upgrade is on: the upgrade walk moves them, within the limits."""
    can_walk: bool
    """Turning auto upgrade on would (the ClusterPolicy governs the drivers: no NVIDIADriver
    resources, no sandbox workloads)."""

    @classmethod
    def of(cls, nodes: Iterable[str], policy: ClusterPolicy) -> TakeoverWait | None:
        """What `policy`'s takeover waits for (None: no node is on the reference's driver).
        The same rule as the upgrade's pool for the reference's driver DaemonSet."""
        names = tuple(sorted(nodes))
        if not names:
            return None
        driver = policy.spec.driver
        sandbox = policy.spec.sandbox_workloads.enabled
        can_walk = driver.enabled and not driver.use_nvidia_driver_crd and not sandbox
        return cls(names, can_walk and driver.upgrade_policy.auto_upgrade, can_walk)

    @property
    def reason(self) -> str:
        return WALKING if self.walks else AUTO_UPGRADE_OFF

    @property
    def message(self) -> str:
        count = len(self.nodes)
        runs = "node still runs" if count == 1 else "nodes still run"
        head = f"{count} {runs} NVIDIA's operator's driver ({names_and_more(self.nodes, NAMED)})"
        limits = "within maxParallelUpgrades and maxUnavailable"
        if self.walks:
            return f"{head}; the driver upgrade walk moves them to ours, {limits}"
        how = (
            "driver auto upgrade is off: drain a node and delete its driver pod "
            "(app.kubernetes.io/component=nvidia-driver) to move it to ours"
        )
        if self.can_walk:
            how += f", or set driver.upgradePolicy.autoUpgrade: true to walk them all {limits}"
        return f"{head}; {how}"
