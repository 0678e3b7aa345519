"""A controller-runtime style engine on asyncio. Knows nothing about GPUs.

This face is what an operator author uses: `connect` to find the API server; a `Manager`
that owns the cache, the client and the controllers; `Reconciler`s that take a `Request`
and return a `Result`; the predicates and mappings that decide what a watch enqueues; and
the object helpers. Two small faces
beside it: `reconciler.errors` (the typed errors a reconcile catches) and `reconciler.kinds`
(the built-in kinds as GVKs). The machinery under it all (queues, stores, reflectors, the
transport, clocks, rate limiters, log formatters) is in `reconciler.lowlevel`, for tests,
benchmarks and unusual wiring.
"""

from reconciler import errors, kinds
from reconciler._address import split_address
from reconciler._cache import Cache
from reconciler._client import Client
from reconciler._connection import ApiConnection
from reconciler._controller import (
    Controller,
    ReconcileFunc,
    Reconciler,
    Result,
    paced_interval,
)
from reconciler._events import NORMAL, WARNING, EventRecorder
from reconciler._handlers import MapFunc, enqueue_mapped, enqueue_object, enqueue_owner
from reconciler._heap import tune_collector
from reconciler._http_server import MetricsServing
from reconciler._indexers import OWNER_INDEX, IndexFunc, by_label, by_owner_uid, label_index_name
from reconciler._informer import Informer
from reconciler._kubeconfig import KubeconfigError, connect
from reconciler._leader_election import LeaderElectionConfig
from reconciler._logging import configure_logging
from reconciler._manager import Manager
from reconciler._metrics import Metrics, metrics_for
from reconciler._objects import (
    GVK,
    Object,
    ObjectKey,
    Request,
    annotations_of,
    generation_of,
    is_deleting,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    owner_references_of,
    resource_version_of,
    revision_of,
    uid_of,
)
from reconciler._outcomes import Applied, Eviction, EvictionResult, Operation
from reconciler._predicates import (
    And,
    AnnotationsChanged,
    Funcs,
    GenerationChanged,
    LabelsChanged,
    Matching,
    Or,
    Predicate,
    ResourceVersionChanged,
)
from reconciler._transport import PatchType
from reconciler._written import WrittenCopies

__all__ = [
    "GVK",
    "NORMAL",
    "OWNER_INDEX",
    "WARNING",
    "And",
    "AnnotationsChanged",
    "ApiConnection",
    "Applied",
    "Cache",
    "Client",
    "Controller",
    "EventRecorder",
    "Eviction",
    "EvictionResult",
    "Funcs",
    "GenerationChanged",
    "IndexFunc",
    "Informer",
    "KubeconfigError",
    "LabelsChanged",
    "LeaderElectionConfig",
    "Manager",
    "MapFunc",
    "Matching",
    "Metrics",
    "MetricsServing",
    "Object",
    "ObjectKey",
    "Operation",
    "Or",
    "PatchType",
    "Predicate",
    "ReconcileFunc",
    "Reconciler",
    "Request",
    "ResourceVersionChanged",
    "Result",
    "WrittenCopies",
    "annotations_of",
    "by_label",
    "by_owner_uid",
    "configure_logging",
    "connect",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "errors",
    "generation_of",
    "is_deleting",
    "kinds",
    "label_index_name",
    "labels_of",
    "metrics_for",
    "name_of",
    "namespace_of",
    "owner_reference",
    "owner_references_of",
    "paced_interval",
    "resource_version_of",
    "revision_of",
    "split_address",
    "tune_collector",
    "uid_of",
]
