"""Secure metrics against the real API server: a scrape is HTTPS, and the API server says
who may make it (TokenReview, then a SubjectAccessReview for GET /metrics), as a
Prometheus with and without the shipped `gpu-operator-metrics-reader` role would see it."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from reconciler import Manager, MetricsServing
from reconciler.errors import NotFound
from reconciler.lowlevel import Transport
from tests.polling import eventually

from .conftest import Kit

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
READER_ROLE = REPO / "config" / "rbac" / "metrics_reader_role.yaml"
CLUSTER_ROLE_BINDING = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


async def service_account_token(transport: Transport, namespace: str, name: str) -> str:
    """A ServiceAccount and a token for it from the TokenRequest API (what the kubelet
    mounts into a scraper's pod)."""
    await transport.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    answer = await transport.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    token: str = answer["status"]["token"]
    return token


async def scrape(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as http,
        # The self-signed certificate is verified by nobody, as with insecureSkipVerify.
        http.get(url, headers=headers, ssl=False) as response,
    ):
        return response.status, await response.text()


async def test_metrics_are_https_and_only_for_scrapers_rbac_allows(
    api_client: Any, kit: Kit, namespace: str
) -> None:
    role = yaml.safe_load(READER_ROLE.read_text())
    await kit.client.apply(role)
    allowed = await service_account_token(kit.transport, namespace, "prometheus")
    stranger = await service_account_token(kit.transport, namespace, "stranger")
    binding = f"metrics-reader-{uuid.uuid4().hex[:6]}"
    await kit.transport.request(
        "POST",
        CLUSTER_ROLE_BINDING,
        body={
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        },
    )
    mgr = Manager(
        api_client,
        field_manager="tests",
        bind_address="127.0.0.1:0",
        metrics=MetricsServing("127.0.0.1:0", secure=True, auth_cache_ttl=1.0),
    )
    task = asyncio.create_task(mgr.run())
    try:
        await eventually(lambda: mgr.ready or task.done(), "manager ready")
        url = f"https://127.0.0.1:{mgr.metrics_port}/metrics"

        assert (await scrape(url))[0] == 401
        assert (await scrape(url, "not-a-token"))[0] == 401
        assert (await scrape(url, stranger))[0] == 403

        async def scraped() -> bool:
            return (await scrape(url, allowed))[0] == 200

        await eventually(scraped, "the bound ServiceAccount to scrape")
        status, text = await scrape(url, allowed)
        assert status == 200 and "rest_client_requests_total" in text

        # Plain HTTP on the metrics port gets nothing; the probes stay plain and serve no
        # metrics, so the lock cannot be walked around.
        with pytest.raises(aiohttp.ClientError):
            await scrape(url.replace("https", "http"), allowed)
        probes = f"http://127.0.0.1:{mgr.http_port}"
        assert (await scrape(probes + "/readyz"))[0] == 200
        assert (await scrape(probes + "/metrics", allowed))[0] == 404

        # Revoking the binding revokes scraping, once the cached verdict expires.
        await kit.transport.request("DELETE", f"{CLUSTER_ROLE_BINDING}/{binding}")

        async def refused() -> bool:
            return (await scrape(url, allowed))[0] == 403

        await eventually(refused, "the unbound ServiceAccount to be refused")
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 60)
        with contextlib.suppress(NotFound):
            await kit.transport.request("DELETE", f"{CLUSTER_ROLE_BINDING}/{binding}")
