"""The engine's machinery, for tests, benchmarks and wiring the `Manager` does not do.

An operator author should not need anything here: queues, the store and the reflector
that fills it, the HTTP transport and the REST mapper, clocks, backoff and rate limiters,
the trimming of cached objects, leader election's elector and the hash `Client.apply`
writes.
"""

from reconciler._backoff import Backoff
from reconciler._clock import Clock, FakeClock, MonotonicClock
from reconciler._connection import Connection, StaticToken, TokenFile, as_connection
from reconciler._connectivity import Connectivity
from reconciler._decode import ObjectDecoder
from reconciler._delaying_queue import DelayingQueue
from reconciler._exceptions import ShutDown, error_from_status
from reconciler._handlers import WatchHandler
from reconciler._http_server import MetricsServer, ProbeServer
from reconciler._indexers import NAMESPACE_INDEX, by_namespace
from reconciler._informer import EventHandler
from reconciler._leader_election import LeaderElector
from reconciler._logging import JsonFormatter, TextFormatter, reconciling
from reconciler._metrics import request_observer
from reconciler._metrics_auth import MetricsAuthorizer
from reconciler._outcomes import desired_hash
from reconciler._queue import Queue
from reconciler._queue_metrics import NoQueueMetrics, PrometheusQueueMetrics, QueueMetrics
from reconciler._rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from reconciler._rate_limiting_queue import RateLimitingQueue
from reconciler._reflector import Reflector, Sink
from reconciler._restmapper import Resource, RESTMapper
from reconciler._scope import Scope
from reconciler._store import Store
from reconciler._transport import METADATA_ONLY, RequestObserver, Transport
from reconciler._trim import DEFAULT_DROP, Path, Transform, Trimmer, drop_paths

__all__ = [
    "DEFAULT_DROP",
    "METADATA_ONLY",
    "NAMESPACE_INDEX",
    "Backoff",
    "BucketRateLimiter",
    "Clock",
    "Connection",
    "Connectivity",
    "DelayingQueue",
    "EventHandler",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "JsonFormatter",
    "LeaderElector",
    "MaxOfRateLimiter",
    "MetricsAuthorizer",
    "MetricsServer",
    "MonotonicClock",
    "NoQueueMetrics",
    "ObjectDecoder",
    "Path",
    "ProbeServer",
    "PrometheusQueueMetrics",
    "Queue",
    "QueueMetrics",
    "RESTMapper",
    "RateLimiter",
    "RateLimitingQueue",
    "Reflector",
    "RequestObserver",
    "Resource",
    "Scope",
    "ShutDown",
    "Sink",
    "StaticToken",
    "Store",
    "TextFormatter",
    "TokenFile",
    "Transform",
    "Transport",
    "Trimmer",
    "WatchHandler",
    "as_connection",
    "by_namespace",
    "default_controller_rate_limiter",
    "desired_hash",
    "drop_paths",
    "error_from_status",
    "reconciling",
    "request_observer",
]
