"""The kernel pin outside a walk: it follows what the policy wants unless a running driver
would be swapped under GPU pods, which only the walk may do."""

from __future__ import annotations

from components.upgrade import PinChange, PodView, pin_change

from .builders import driver as driver_pod
from .builders import node

OLD, NEW = "5.15.0-1", "6.8.0-50"


def change(
    *,
    kernel: str | None = NEW,
    pinned_kernel: str | None = None,
    driver: PodView | None = None,
    precompiled: bool | None = True,
    walk: bool = True,
) -> PinChange | None:
    n = node(kernel=kernel, pinned_kernel=pinned_kernel)
    return pin_change(n, driver, precompiled=precompiled, walk_moves_it=walk)


def test_a_node_without_a_driver_gets_its_pin_at_once() -> None:
    c = change()
    assert c is not None and c.value == NEW
    stale = change(pinned_kernel=OLD)
    assert stale is not None and stale.value == NEW
    gone = change(pinned_kernel=OLD, driver=driver_pod(kernel=OLD, pinned=True, terminating=True))
    assert gone is not None and gone.value == NEW
    # Precompiled turned off: an idle pinned node goes back to the per-OS DaemonSet.
    back = change(pinned_kernel=OLD, precompiled=False)
    assert back is not None and back.value is None


def test_a_running_driver_of_the_wrong_kind_or_kernel_waits_for_the_walk() -> None:
    assert change(pinned_kernel=OLD, driver=driver_pod(kernel=OLD, pinned=True)) is None
    assert change(driver=driver_pod(kernel=NEW)) is None  # per-OS, precompiled turned on
    pinned = driver_pod(kernel=OLD, pinned=True)
    assert change(pinned_kernel=OLD, driver=pinned, precompiled=False) is None


def test_with_auto_upgrade_off_the_pin_follows_the_policy_at_once() -> None:
    running = driver_pod(kernel=OLD, pinned=True)
    c = change(pinned_kernel=OLD, driver=running, walk=False)
    assert c is not None and c.value == NEW and "auto upgrade is off" in c.reason
    off = change(pinned_kernel=OLD, driver=running, walk=False, precompiled=False)
    assert off is not None and off.value is None


def test_a_settled_node_or_one_no_policy_governs_is_left_alone() -> None:
    assert change(pinned_kernel=NEW) is None
    assert change(precompiled=False) is None
    assert change(kernel=None) is None
    assert change(pinned_kernel=OLD, precompiled=None) is None
