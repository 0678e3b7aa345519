"""Reads from the cache, writes to the API server.

Writes are level-based and idempotent by construction: server-side apply of the whole
desired object with one field manager (`force` on objects we own, `_apply`), so the same
reconcile run twice makes the same request and the server does the merging.

Transient failures (unreachable server, 429 throttling, 5xx) are retried here with
tenacity; everything else surfaces as a typed exception carrying the server's message.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol, TypeVar, Unpack

import msgspec

from reconciler._apply import ServerSideApply
from reconciler._cache import Cache
from reconciler._decode import decode, decode_identity, encode
from reconciler._exceptions import (
    ApiUnreachable,
    LeaderElectionLost,
    NotFound,
    ServerError,
    TooManyRequests,
)
from reconciler._kinds import POD
from reconciler._live_reads import LiveReads
from reconciler._objects import GVK, Object, display_name, display_name_of, name_of, namespace_of
from reconciler._outcomes import Applied, Eviction, EvictionResult
from reconciler._restmapper import Resource, RESTMapper
from reconciler._retry import TRANSIENT, with_retries
from reconciler._transport import JSON, METADATA_ONLY, Params, PatchType, RequestOptions, Transport

log = logging.getLogger("reconciler.client")
_Answer = TypeVar("_Answer", covariant=True)


class _TransportSend(Protocol[_Answer]):
    """`Transport.request` or `Transport.request_with_status`."""

    def __call__(
        self, method: str, path: str, **options: Unpack[RequestOptions]
    ) -> Awaitable[_Answer]: ...


_SORTED = msgspec.json.Encoder(order="sorted")
"""For the patch a log line shows: keys sorted, so equal patches read the same."""


class Client(LiveReads):
    """Reads from the cache (and, for the rare fresh read, `LiveReads` from the server);
    writes to the API server."""

    def __init__(
        self,
        transport: Transport,
        mapper: RESTMapper,
        cache: Cache,
        *,
        field_manager: str,
        hash_annotation: str | None = None,
        attempts: int = 5,
        may_write: Callable[[], bool] | None = None,
    ) -> None:
        """`hash_annotation` names the annotation that records `desired_hash` on applied
        objects; without it every apply is sent. `may_write`, asked before each write
        (and each retry of one), refuses it with `LeaderElectionLost` when false: the
        manager's lease check, so a leader that slept past its lease writes nothing."""
        self.transport = transport
        self.mapper = mapper
        self.cache = cache
        self.field_manager = field_manager
        self.attempts = attempts
        self.may_write = may_write
        self._ssa = ServerSideApply(
            mapper,
            cache,
            hash_annotation=hash_annotation,
            send=self.request_with_status,
        )

    # -- reads from the cache ------------------------------------------------------------

    def get(self, gvk: GVK, name: str, namespace: str = "") -> Object | None:
        """From the cache (`NotCached` if the kind has no informer). Do not mutate it."""
        return self.cache.get(gvk, name, namespace)

    def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        index: tuple[str, str] | None = None,
    ) -> builtins.list[Object]:
        return self.cache.list(gvk, namespace=namespace, labels=labels, index=index)

    # -- writes --------------------------------------------------------------------------

    async def apply(
        self,
        obj: Object,
        *,
        force: bool = True,
        field_manager: str | None = None,
        subresource: str | None = None,
    ) -> Applied:
        """Server-side apply `obj` (the whole desired state of the fields we manage), and
        say what it did.

        The object before the apply comes from the cache when the kind's informer has
        synced, else from one GET: "unchanged" is then a fact, not a guess. With a
        `hash_annotation`, an apply whose desired hash is already on that object is not sent.
        """
        return await self._ssa.apply(
            obj,
            force=force,
            field_manager=field_manager or self.field_manager,
            subresource=subresource,
        )

    async def apply_status(self, obj: Object, *, field_manager: str | None = None) -> Applied:
        """Server-side apply to the status subresource (only `status` is taken)."""
        return await self.apply(obj, field_manager=field_manager, subresource="status")

    async def create(self, obj: Object) -> Object:
        gvk = GVK.of(obj)
        res = await self.mapper.resource_for(gvk)
        params: Params = {"fieldManager": self.field_manager}
        out = await self.request("POST", res.path(namespace_of(obj)), params=params, body=obj)
        log.info("created %s %s", gvk.kind, display_name_of(out))
        return out

    async def update(self, obj: Object, *, subresource: str | None = None) -> Object:
        """Replace (PUT). With `metadata.resourceVersion` set, a stale copy gets `Conflict`."""
        gvk = GVK.of(obj)
        res = await self.mapper.resource_for(gvk)
        params: Params = {"fieldManager": self.field_manager}
        out = await self.request(
            "PUT",
            res.path(namespace_of(obj), name_of(obj), subresource),
            params=params,
            body=obj,
        )
        log.info(
            "updated %s%s %s",
            gvk.kind,
            "/" + subresource if subresource else "",
            display_name_of(obj),
        )
        return out

    async def update_status(self, obj: Object) -> Object:
        """Replace the status subresource; optimistic concurrency on resourceVersion."""
        return await self.update(obj, subresource="status")

    async def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Object | builtins.list[Object],
        *,
        namespace: str = "",
        subresource: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        quiet: bool = False,
        whole_answer: bool = True,
    ) -> Object:
        """Patch one object: by default a JSON merge patch (labels, annotations,
        `spec.unschedulable`); `PatchType.JSON` for a list of operations (e.g. with a
        `test`), `PatchType.STRATEGIC_MERGE` for built-in kinds.

        `quiet`: the caller logs the change itself, in its own words; ours goes to DEBUG so
        the change still makes one INFO line, not two. `whole_answer=False`: the object
        returned holds only its kind and identity (name, namespace, uid, resourceVersion,
        generation), for a caller that does not read the rest; the API server is asked for
        the metadata alone, so it neither encodes nor sends a node's images and status
        (1,000 node label writes in a 1,000-node rollout)."""
        res = await self.mapper.resource_for(gvk)
        out = await self.request(
            "PATCH",
            res.path(namespace, name, subresource),
            params={"fieldManager": self.field_manager},
            body=encode(patch),
            content_type=patch_type,
            decoder=decode if whole_answer else decode_identity,
            accept=JSON if whole_answer else METADATA_ONLY,
        )
        if not whole_answer:
            out = {**out, "apiVersion": gvk.api_version, "kind": gvk.kind}
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "patched %s%s %s: %s",
            gvk.kind,
            "/" + subresource if subresource else "",
            display_name_of(out),
            _summary(patch),
        )
        return out

    async def delete(
        self,
        gvk: GVK,
        name: str,
        *,
        namespace: str = "",
        propagation_policy: str = "Background",
        grace_period_seconds: int | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        missing_ok: bool = False,
    ) -> None:
        """Delete; `uid` makes sure we delete the object we looked at, not a successor;
        `resource_version`, that it has not changed since (409 `Conflict` otherwise)."""
        res = await self.mapper.resource_for(gvk)
        body: Object = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation_policy,
        }
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        if any(preconditions.values()):
            body["preconditions"] = {k: v for k, v in preconditions.items() if v}
        self._ssa.forget(gvk, namespace, name)
        try:
            await self.request("DELETE", res.path(namespace, name), body=body)
        except NotFound:
            if not missing_ok:
                raise
            log.debug("delete %s %s: already gone", gvk.kind, display_name(namespace, name))
            return
        log.info("deleted %s %s (%s)", gvk.kind, display_name(namespace, name), propagation_policy)

    async def evict(
        self, name: str, namespace: str, *, grace_period_seconds: int | None = None
    ) -> EvictionResult:
        """Ask to evict a pod, honouring PodDisruptionBudgets.

        A refusal (429, usually a PDB) is an outcome, not an error: the caller tries again
        later. Other failures raise.
        """
        res = await self.mapper.resource_for(POD)
        body: Object = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        if grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
        path = res.path(namespace, name, "eviction")
        try:
            # 429 here means "not now", so only the other transient errors are retried.
            await self.request("POST", path, body=body, retry_on=(ApiUnreachable, ServerError))
        except TooManyRequests as exc:
            log.debug("eviction of pod %s/%s refused: %s", namespace, name, exc.message)
            return EvictionResult(Eviction.BLOCKED, exc.message, exc.retry_after)
        except NotFound as exc:
            return EvictionResult(Eviction.NOT_FOUND, exc.message)
        log.info("evicted pod %s/%s", namespace, name)
        return EvictionResult(Eviction.EVICTED)

    async def resource(self, gvk: GVK) -> Resource:
        return await self.mapper.resource_for(gvk)

    async def request(
        self,
        method: str,
        path: str,
        *,
        retry_on: Iterable[type[Exception]] = TRANSIENT,
        **options: Unpack[RequestOptions],
    ) -> Object:
        """A raw request with the transient-error retries and none of the logging."""
        return await self._retried(self.transport.request, method, path, retry_on, options)

    async def request_with_status(
        self,
        method: str,
        path: str,
        *,
        retry_on: Iterable[type[Exception]] = TRANSIENT,
        **options: Unpack[RequestOptions],
    ) -> tuple[int, Object]:
        """Like `request`, with the success status: 201 tells a create from an update."""
        return await self._retried(
            self.transport.request_with_status, method, path, retry_on, options
        )

    async def _retried(
        self,
        send: _TransportSend[_Answer],
        method: str,
        path: str,
        retry_on: Iterable[type[Exception]],
        options: RequestOptions,
    ) -> _Answer:
        """`send` with the retries, and a write with the lease check right before it goes."""
        if method != "GET":
            options["before_send"] = self._write_check(method, path)
        return await with_retries(
            lambda: send(method, path, **options), attempts=self.attempts, retry_on=retry_on
        )

    def _write_check(self, method: str, path: str) -> Callable[[], None] | None:
        """What the transport asks right before a write goes out: `may_write`, if any."""
        may_write = self.may_write
        if may_write is None:
            return None

        def check() -> None:
            if not may_write():
                raise LeaderElectionLost(f"not sending {method} {path}: our lease may have expired")

        return check


def _summary(patch: Object | list[Object]) -> str:
    text = _SORTED.encode(patch).decode()
    return text if len(text) <= 200 else text[:197] + "..."
