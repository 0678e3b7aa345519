"""What both stacks' controllers (the ClusterPolicy's and the GPUCluster's) tell alike about
a reconcile: the `gpu_operator_*` reconciliation metrics, one Event per operand and kind of
change, and the findings of a spec that cannot be read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Sequence

import pydantic

from components.controllers._apply import Change
from components.controllers._status import Findings
from components.metrics import OperatorMetrics, ReconciliationStatus
from reconciler import NORMAL, EventRecorder, Object, Result, generation_of, name_of

INVALID_SPEC = "InvalidSpec"
READY = "ready"
_REASONS = {"created": "Created", "updated": "Updated", "deleted": "Deleted"}


class StackReport:
    """One stack controller's metrics and Events; `log` takes each change at debug, as
    "`kind` name: change"."""

    def __init__(
        self, metrics: OperatorMetrics, recorder: EventRecorder, log: logging.Logger, kind: str
    ) -> None:
        self.metrics = metrics
        self.recorder = recorder
        self.log = log
        self.kind = kind

    async def counted(self, reconcile: Awaitable[Result | None]) -> Result | None:
        """`reconcile` awaited, counted, and an error it raises counted and the status
        metric set to it."""
        self.metrics.reconciliation_total.inc()
        try:
            return await reconcile
        except Exception:
            self.metrics.reconciliation_failed_total.inc()
            self.metrics.set_status(ReconciliationStatus.ERROR)
            raise

    async def changes(self, obj: Object, changes: Sequence[Change]) -> None:
        """One Event per operand and kind of change, naming its objects: a fresh policy
        creates 37 objects, which as 37 Events would spend the object's Event budget
        (`reconciler.EventRecorder`) before its DaemonSets' turn."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for change in changes:
            self.log.debug("%s %s: %s", self.kind, name_of(obj), change)
            grouped.setdefault((change.component, change.verb), []).append(change.what)
        for (component, verb), objects in grouped.items():
            message = f"{verb} {', '.join(objects)} ({component})"
            await self.recorder.event(obj, NORMAL, _REASONS[verb], message)

    def reconciled(self, findings: Findings, state: str) -> None:
        """The metrics of a reconcile that wrote its status in `state`."""
        m = self.metrics
        m.gpu_nodes_total.set(findings.gpu_nodes)
        m.reconciliation_has_nfd_labels.set(1 if findings.has_nfd_labels else 0)
        if state == READY:
            m.set_status(ReconciliationStatus.READY)
            m.reconciliation_last_success_ts_seconds.set(time.time())
        else:
            m.set_status(ReconciliationStatus.NOT_READY)
            m.reconciliation_failed_total.inc()


def invalid_spec(namespace: str, obj: Object, exc: pydantic.ValidationError) -> Findings:
    """The findings of a spec that cannot be read: its first errors, named by field."""
    errors = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
    )
    return Findings(
        namespace=namespace,
        generation=generation_of(obj),
        problems=[(INVALID_SPEC, f"the spec cannot be read: {errors}")],
    )
