"""Reads from the API server itself, for the rare read that must be fresh.

The cache serves every other read. These are for what it does not hold (a drain's pods with
their volumes, the pods of an operand whose pods are not watched) or cannot vouch for yet.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator, Callable
from typing import Any

from reconciler._decode import decode, page_decoder
from reconciler._objects import GVK, Object, metadata_of
from reconciler._restmapper import RESTMapper
from reconciler._transport import Params


class LiveReads:
    """What `Client` reads from the server; it supplies `mapper` and `request`."""

    mapper: RESTMapper

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        decoder: Callable[[bytes], Any] = decode,
    ) -> Object:
        raise NotImplementedError

    async def get_live(self, gvk: GVK, name: str, namespace: str = "") -> Object:
        res = await self.mapper.resource_for(gvk)
        return await self.request("GET", res.path(namespace, name))

    async def list_live(
        self, gvk: GVK, *, namespace: str | None = None, label_selector: str | None = None
    ) -> builtins.list[Object]:
        return [
            item
            async for page in self.list_live_pages(
                gvk, namespace=namespace, label_selector=label_selector, limit=None
            )
            for item in page
        ]

    async def list_live_pages(
        self,
        gvk: GVK,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        limit: int | None = 500,
        schema: Any = None,
    ) -> AsyncIterator[builtins.list[Object]]:
        """The objects, `limit` at a time (the API server's `continue` chunks): a reader
        that keeps a little of each holds one page at once, not the whole list. `schema`
        (a TypedDict, as an informer's) decodes each object to what it names, and no more:
        a page of 500 operand pods is ~4 MB of JSON, most of it never read."""
        res = await self.mapper.resource_for(gvk)
        decoder = decode if schema is None else page_decoder(schema)
        params: dict[str, str | int] = {"labelSelector": label_selector} if label_selector else {}
        if limit is not None:
            params["limit"] = limit
        while True:
            doc = await self.request("GET", res.path(namespace), params=params, decoder=decoder)
            items: builtins.list[Object] = doc.get("items") or []
            for item in items:
                item.setdefault("apiVersion", gvk.api_version)
                item.setdefault("kind", gvk.kind)
            yield items
            token = metadata_of(doc).get("continue")
            if not token:
                return
            params = {**params, "continue": token}
