"""The upgrade controller: moves each node on as soon as the event that allows it arrives.

Two controllers share one set of informers (`_watches`):

* **upgrade-controller** (one request per node, several workers, `_node`): everything a node
  does on its own, from noticing its driver is outdated to uncordoning it.
* **upgrade-controller-pool** (one request, one worker, `_pool`): admission, the one step that
  weighs nodes against each other (maxParallelUpgrades, maxUnavailable), then status and
  metrics.

Both read the cluster through one `ClusterReader` and write nodes through one
`NodeWriter`, which remembers each write until the cache shows it. State lives only on
the nodes (labels and annotations, written with a compare-and-set on the state label) and
in the objects themselves. A restarted operator rebuilds everything from its first list and
carries on where the cluster says it was.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from components.upgrade._kernels import LoadedKernels
from components.upgrade._metrics import UpgradeMetrics, upgrade_metrics_for
from components.upgrade._names import NODE
from components.upgrade._node import NodeReconciler
from components.upgrade._pool import PoolReconciler, StatusSink
from components.upgrade._preflight import AdmissionPreflight, ConditionSink
from components.upgrade._reader import ClusterReader
from components.upgrade._retry import DEFAULT_BACKOFF, Backoff
from components.upgrade._status import Waits
from components.upgrade._step import DEFAULT_VALIDATION_TIMEOUT
from components.upgrade._tracker import WriteTracker
from components.upgrade._watches import POOL_REQUEST, UpgradeInformers, Watches
from components.upgrade._writer import NodeWriter
from reconciler import Manager

#: The reference has one controller, `upgrade-controller`; its name goes to the per-node
#: controller, which does nearly all of the work, so runbooks and dashboards matching
#: `controller="upgrade-controller"` see it. The pool controller keeps the prefix and a
#: suffix: its metrics stay apart, and `controller=~"upgrade-controller.*"` selects both.
POOL_MIN_INTERVAL = 0.02
"""Seconds between two pool reconciles at least, however cheap: a freed slot is refilled
within a few API round trips (it was 0.1 s, a tenth of a node's whole walk)."""
NODE_CONTROLLER = "upgrade-controller"
POOL_CONTROLLER = "upgrade-controller-pool"


def _operator_pod_from_env() -> tuple[str, str] | None:
    """Our own pod, from the downward API (`POD_NAME`), or in a pod the hostname (which
    Kubernetes sets to the pod's name)."""
    name = os.environ.get("POD_NAME")
    if not name and os.environ.get("KUBERNETES_SERVICE_HOST"):
        name = os.environ.get("HOSTNAME")
    namespace = os.environ.get("POD_NAMESPACE") or os.environ.get("OPERATOR_NAMESPACE")
    return (namespace, name) if name and namespace else None


class UpgradeController:
    """Registers the driver-upgrade controllers (and their informers) on a manager."""

    def __init__(
        self,
        manager: Manager,
        *,
        namespace: str,
        workers: int = 16,
        operator_pod: tuple[str, str] | None = None,
        auto_upgrade_gauge: Any = None,
        validation_timeout: float = DEFAULT_VALIDATION_TIMEOUT,
        retry_backoff: Backoff = DEFAULT_BACKOFF,
        expectation_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        event_component: str = "gpu-operator",
        status_sink: StatusSink | None = None,
        condition_sink: ConditionSink | None = None,
    ) -> None:
        """`status_sink`: who writes a policy's `status.upgrade` (`PoolReconciler`);
        `condition_sink`: who writes pre-flight's condition (`AdmissionPreflight`);
        `retry_backoff`: how long a failed node waits before each retry (`_retry`)."""
        self.namespace = namespace
        self.metrics: UpgradeMetrics = upgrade_metrics_for(
            manager.registry, auto_upgrade_enabled=auto_upgrade_gauge
        )
        self.reader = ClusterReader(manager.cache, namespace)
        self.writer = NodeWriter(
            manager.client,
            manager.event_recorder(event_component),
            clock=clock,
            expectation_timeout=expectation_timeout,
        )
        self.waits = Waits()
        self.kernels = LoadedKernels(manager.cache, namespace)
        self.nodes = NodeReconciler(
            manager.client,
            self.reader,
            self.writer,
            self.waits,
            self.kernels,
            operator_pod=operator_pod if operator_pod is not None else _operator_pod_from_env(),
            validation_timeout=validation_timeout,
            expectation_timeout=expectation_timeout,
            clock=clock,
            backoff=retry_backoff,
        )
        self.preflight = AdmissionPreflight(
            self.reader, manager.client, self.writer.recorder, condition_sink=condition_sink
        )
        self.pools = PoolReconciler(
            self.reader,
            self.writer,
            self.waits,
            self.metrics,
            admission_fold=self.nodes.admission_fold,
            preflight=self.preflight,
            status_sink=status_sink,
            clock=clock,
        )

        informers = UpgradeInformers.register(manager, namespace)
        informers.nodes.add_handler(self.kernels)
        self.node_controller = manager.controller(
            NODE_CONTROLLER, self.nodes.reconcile, max_concurrent_reconciles=workers
        )
        # The pool reconcile weighs every node: paced, so that a burst of node events costs
        # about 2% of a core whatever the cluster's size. A slot a node frees waits for the
        # next admission up to that long: 50 times one reconcile's CPU, or the minimum
        # interval when that is longer (at 100 nodes a reconcile costs under 3 ms: 20 ms).
        self.pool_controller = manager.controller(
            POOL_CONTROLLER,
            self.pools.reconcile,
            min_interval=POOL_MIN_INTERVAL,
            busy_fraction=0.02,
            max_interval=1.0,
        )
        self.waits.on_change = lambda: self.pool_controller.enqueue(POOL_REQUEST)
        self.preflight.checker.on_change = self.waits.on_change
        Watches(self.reader).connect(informers, self.node_controller, self.pool_controller)

    def busy(self) -> bool:
        """Whether the upgrade still has work under way: a node request queued or being
        reconciled (not one waiting for a timeout), a pool request queued, reconciled or
        waiting for its turn (its counts are due), a node write whose event has not come
        back (the pool counts it once it has), or a pool's `status.upgrade` write queued or
        in flight. The ClusterPolicy says `ready` only once this is false, so that what it
        reports then is final (`components.controllers`)."""
        pool = self.pool_controller
        return (
            self.node_controller.busy
            or pool.busy
            or bool(pool.queue.waiting)
            or bool(self.writer.tracker.pending(lambda name: self.reader.cache.get(NODE, name)))
            or self.pools.status_writes_pending()
        )

    def status_writes_pending(self) -> bool:
        """Whether a pool's `status.upgrade` write is queued or in flight."""
        return self.pools.status_writes_pending()

    @property
    def admissions(self) -> WriteTracker:
        """Admission's writes, which the next admission waits for the cache to show."""
        return self.writer.admissions
