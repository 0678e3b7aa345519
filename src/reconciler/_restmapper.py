"""From group/version/kind to URL path, by asking the server's discovery documents.

Any kind works the same way (core, apps, coordination, policy, custom resources): we learn
its plural and whether it is namespaced once per group-version, then build paths locally.
"""

from __future__ import annotations

import asyncio
from typing import NamedTuple

from reconciler._exceptions import NotFound, UnknownKind
from reconciler._objects import GVK
from reconciler._retry import with_retries
from reconciler._transport import Transport


class Resource(NamedTuple):
    gvk: GVK
    plural: str
    namespaced: bool

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection, or of one object (and one of its subresources)."""
        g = self.gvk
        parts = [f"/apis/{g.group}/{g.version}" if g.group else f"/api/{g.version}"]
        if self.namespaced and namespace:
            parts.append(f"/namespaces/{namespace}")
        parts.append(f"/{self.plural}")
        if name is not None:
            parts.append(f"/{name}")
            if subresource:
                parts.append(f"/{subresource}")
        return "".join(parts)


class RESTMapper:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._known: dict[GVK, Resource] = {}
        self._fetched: set[tuple[str, str]] = set()
        self._lock = asyncio.Lock()

    def register(self, resource: Resource) -> None:
        """Teach the mapper a kind without discovery (tests, or a CRD not yet served)."""
        self._known[resource.gvk] = resource

    async def resource_for(self, gvk: GVK) -> Resource:
        found = self._known.get(gvk)
        if found is not None:
            return found
        async with self._lock:
            found = self._known.get(gvk)
            if found is None:
                # A miss may be a CRD installed since we last looked: fetch again once.
                await self._discover(gvk.group, gvk.version)
                found = self._known.get(gvk)
        if found is None:
            raise UnknownKind(f"the server does not serve {gvk}")
        return found

    async def _discover(self, group: str, version: str) -> None:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = await with_retries(lambda: self._transport.request("GET", path))
        except NotFound:
            return
        self._fetched.add((group, version))
        for res in doc.get("resources") or ():
            name = str(res.get("name") or "")
            if not name or "/" in name:
                continue  # subresources such as pods/status
            gvk = GVK(
                str(res.get("group") or group), str(res.get("version") or version), res["kind"]
            )
            self._known.setdefault(gvk, Resource(gvk, name, bool(res.get("namespaced"))))
