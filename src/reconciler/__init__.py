"""A controller-runtime style engine on asyncio. Knows nothing about GPUs.

This face is what an operator author uses: a `Manager` that owns the cache, the client and
the controllers; `Reconciler`s that take a `Request` and return a `Result`; the predicates
and mappings that decide what a watch enqueues; the object helpers; and the typed errors.
The machinery under it (queues, stores, reflectors, the transport, clocks and rate
limiters) is in `reconciler.lowlevel`, for tests, benchmarks and unusual wiring.
"""

from reconciler._address import split_address
from reconciler._cache import Cache
from reconciler._client import Applied, Client, Eviction, EvictionResult, Operation
from reconciler._controller import Controller, ReconcileFunc, Reconciler, Result
from reconciler._events import NORMAL, WARNING, EventRecorder
from reconciler._exceptions import (
    AlreadyExists,
    ApiError,
    ApiUnreachable,
    BadRequest,
    CacheSyncTimeout,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    LeaderElectionLost,
    NotCached,
    NotFound,
    ReconcilerError,
    ServerError,
    TerminalError,
    TooManyRequests,
    Unauthorized,
    UnknownKind,
)
from reconciler._handlers import MapFunc, enqueue_mapped, enqueue_object, enqueue_owner
from reconciler._http_server import MetricsServing
from reconciler._indexers import OWNER_INDEX, IndexFunc, by_label, by_owner_uid, label_index_name
from reconciler._informer import Informer
from reconciler._kinds import (
    CONFIG_MAP,
    CONTROLLER_REVISION,
    CRD,
    DAEMONSET,
    EVENT,
    NODE,
    PDB,
    POD,
)
from reconciler._leader_election import LeaderElectionConfig
from reconciler._logging import (
    JsonFormatter,
    TextFormatter,
    configure_logging,
    reconciling,
)
from reconciler._manager import Manager
from reconciler._metrics import Metrics, metrics_for
from reconciler._objects import (
    GVK,
    Object,
    ObjectKey,
    Request,
    annotations_of,
    generation_of,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    owner_references_of,
    resource_version_of,
)
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

__all__ = [
    "CONFIG_MAP",
    "CONTROLLER_REVISION",
    "CRD",
    "DAEMONSET",
    "EVENT",
    "GVK",
    "NODE",
    "NORMAL",
    "OWNER_INDEX",
    "PDB",
    "POD",
    "WARNING",
    "AlreadyExists",
    "And",
    "AnnotationsChanged",
    "ApiError",
    "ApiUnreachable",
    "Applied",
    "BadRequest",
    "Cache",
    "CacheSyncTimeout",
    "Client",
    "Conflict",
    "Controller",
    "EventRecorder",
    "Eviction",
    "EvictionResult",
    "Forbidden",
    "Funcs",
    "GenerationChanged",
    "Gone",
    "IndexFunc",
    "Informer",
    "Invalid",
    "JsonFormatter",
    "LabelsChanged",
    "LeaderElectionConfig",
    "LeaderElectionLost",
    "Manager",
    "MapFunc",
    "Matching",
    "Metrics",
    "MetricsServing",
    "NotCached",
    "NotFound",
    "Object",
    "ObjectKey",
    "Operation",
    "Or",
    "Predicate",
    "ReconcileFunc",
    "Reconciler",
    "ReconcilerError",
    "Request",
    "ResourceVersionChanged",
    "Result",
    "ServerError",
    "TerminalError",
    "TextFormatter",
    "TooManyRequests",
    "Unauthorized",
    "UnknownKind",
    "annotations_of",
    "by_label",
    "by_owner_uid",
    "configure_logging",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "generation_of",
    "label_index_name",
    "labels_of",
    "metrics_for",
    "name_of",
    "namespace_of",
    "owner_reference",
    "owner_references_of",
    "reconciling",
    "resource_version_of",
    "split_address",
]
