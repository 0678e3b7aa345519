"""Validation after a driver restart: the node's validator pods must be Ready again.

A validator pod that started before the new driver pod validated the old driver, so it
proves nothing: it is deleted (its DaemonSet recreates it, and the new one validates the new
driver). The node passes when at least one validator pod started after the driver pod, and
every live validator pod on the node is Ready.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from components.upgrade._model import PodView, is_validator_pod


@dataclass(frozen=True, slots=True)
class Validation:
    passed: bool
    stale: tuple[PodView, ...] = ()
    """Validator pods older than the driver pod: delete them."""
    waiting_for: str = ""


def validate(driver: PodView, pods: Iterable[PodView]) -> Validation:
    live = [p for p in pods if is_validator_pod(p.labels) and not p.terminating and p.active]
    stale = tuple(p for p in live if p.created < driver.created)
    fresh = [p for p in live if p.created >= driver.created]
    if stale:
        return Validation(False, stale, "validator pods to restart after the new driver")
    if not fresh:
        return Validation(False, (), "a validator pod to start on the node")
    not_ready = [p for p in fresh if not p.ready]
    if not_ready:
        return Validation(False, (), f"validator pod {not_ready[0].key} to be Ready")
    return Validation(True)
