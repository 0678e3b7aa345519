"""Validation after a driver restart: the node's validator pods must be Ready again, or,
with the node agent on (`nodeAgent.enabled`), the agent must have answered.

A validator pod that started before the new driver pod validated the old driver, so it
proves nothing: it is deleted (its DaemonSet recreates it, and the new one validates the new
driver). The node passes when at least one validator pod started after the driver pod, and
every live validator pod on the node is Ready.

With the agent, its `GPUValidated` condition answers the validator's questions (driver
usable, toolkit in place, the device plugin advertising what NVML sees): the node passes
when it turned True after the driver pod was created, and any validator pods that run are
fresh and Ready as well (none need to run).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from components.upgrade._model import AgentVerdict
from components.upgrade._pods import PodView, is_validator_pod


@dataclass(frozen=True, slots=True)
class Validation:
    passed: bool
    stale: tuple[PodView, ...] = ()
    """Validator pods older than the driver pod: delete them."""
    waiting_for: str = ""


NO_VALIDATOR = "a validator pod to start on the node"


def validate(
    driver: PodView,
    pods: Iterable[PodView],
    *,
    agent: bool = False,
    verdict: AgentVerdict | None = None,
    in_place: bool = False,
) -> Validation:
    """`agent`: the node agent is on, and `verdict` is its answer on this node. `in_place`:
    the driver was restarted in place (restart-only), so the driver the agent validated
    before is the one loaded now: its answer need not be newer than the driver pod."""
    validators = _validators(driver, pods)
    if not agent or validators.stale:
        return validators
    if verdict is None:
        return Validation(False, (), "the node agent to report GPUValidated")
    if not verdict.passed_after(0.0 if in_place else driver.created):
        if verdict.status == "True":
            return Validation(False, (), "the node agent to validate the new driver")
        return Validation(
            False, (), f"the node agent's GPUValidated ({verdict.reason}: {verdict.message})"
        )
    return Validation(True) if validators.waiting_for == NO_VALIDATOR else validators


def _validators(driver: PodView, pods: Iterable[PodView]) -> Validation:
    live = [p for p in pods if is_validator_pod(p.labels) and not p.terminating and p.active]
    stale = tuple(p for p in live if p.created < driver.created)
    fresh = [p for p in live if p.created >= driver.created]
    if stale:
        return Validation(False, stale, "validator pods to restart after the new driver")
    if not fresh:
        return Validation(False, (), NO_VALIDATOR)
    not_ready = [p for p in fresh if not p.ready]
    if not_ready:
        return Validation(False, (), f"validator pod {not_ready[0].key} to be Ready")
    return Validation(True)
