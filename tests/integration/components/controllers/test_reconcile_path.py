"""Which modules of `components.controllers` one ClusterPolicy reconcile runs code in.

Issue 49 asks the policy's reconcile to read top to bottom in few modules; this counts them
on a real API server (a ready policy over a mixed cluster, reconciled once more), following
the tasks the reconcile starts (their context is a copy of its own). `-s` prints the figure;
`hack/reconcile_modules.py` counts the modules the reconcile imports, statically."""

from __future__ import annotations

import contextvars
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from reconciler import Request
from tests.integration.components.controllers.conftest import Cluster
from tests.integration.components.controllers.test_clusterpolicy import mixed_cluster, ready

pytestmark = pytest.mark.integration

CONTROLLERS = Path(__file__).resolve().parents[4] / "src" / "components" / "controllers"
MOST_MODULES = 14
"""The files one reconcile runs code in: 19 before issue 49 (the issue's "today" counted
about 30 imported), 14 since each step keeps its helpers: readiness is one module (the pod
tally and the naming of unready nodes joined `_readiness.py`), the status one pair (what
it says, with the takeover's condition, in `_status.py`; when and what is written, with
the hold on `ready`, in `_status_writer.py`), and the sweep of a replaced DaemonSet's
pods, no step of a policy's reconcile, is a controller of its own (`_orphans.py`). More
means the flow spreads out again: a new helper for one step belongs with that step."""

_in_reconcile: contextvars.ContextVar[bool] = contextvars.ContextVar("in_reconcile", default=False)


async def modules_one_reconcile_runs(cluster: Cluster, name: str) -> dict[str, int]:
    """Per module file (relative to `components/controllers`), how many times the reconcile
    entered it from another module."""
    entered: dict[str, int] = {}
    last: list[str] = [""]
    root = str(CONTROLLERS) + os.sep

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call" or not _in_reconcile.get():
            return
        path = frame.f_code.co_filename
        if not path.startswith(root):
            return
        module = path[len(root) :]
        if module != last[0]:
            entered[module] = entered.get(module, 0) + 1
            last[0] = module

    token = _in_reconcile.set(True)
    sys.setprofile(profile)
    try:
        await cluster.operator.cluster_policy.reconcile(Request("", name))
    finally:
        sys.setprofile(None)
        _in_reconcile.reset(token)
    return entered


async def test_a_policy_reconcile_runs_in_few_modules(cluster: Cluster) -> None:
    await mixed_cluster(cluster)
    name = (await cluster.create_policy("policy"))["metadata"]["name"]
    await ready(cluster, name)
    await cluster.settle()
    entered = await modules_one_reconcile_runs(cluster, name)
    report = ", ".join(f"{m}:{n}" for m, n in sorted(entered.items()))
    print(f"\nreconcile-path: {len(entered)} modules, {sum(entered.values())} entries: {report}")
    assert "clusterpolicy" in report, "the profile saw the reconcile"
    assert len(entered) <= MOST_MODULES, report
