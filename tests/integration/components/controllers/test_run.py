"""`gpu-operator run` as its own process against a real API server: probes, metrics,
leader election, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import AsyncIterator

import aiohttp
import pytest
from kubernetes_asyncio import client

from components.controllers import LEASE_NAME
from gpusim import apply_crds, load_documents
from reconciler.envtest import ControlPlane, free_port
from tests.integration.components.controllers.conftest import REPO
from tests.polling import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def namespace(api_client: client.ApiClient) -> AsyncIterator[str]:
    """A namespace of its own, on a control plane that serves our CRDs."""
    await apply_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    name = f"run-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": name}})
    yield name
    await core.delete_namespace(name)


async def get(
    session: aiohttp.ClientSession, url: str, token: str | None = None
) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        # Secure metrics serve a self-signed certificate: not verified, as insecureSkipVerify.
        async with session.get(url, headers=headers, ssl=False) as response:
            return response.status, await response.text()
    except aiohttp.ClientError:
        return 0, ""


async def scraper_token(api_client: client.ApiClient, namespace: str) -> str:
    """A token for a ServiceAccount bound to the shipped metrics-reader ClusterRole."""
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    role = load_documents([REPO / "config" / "rbac" / "metrics_reader_role.yaml"])[0]
    try:
        await rbac.create_cluster_role(role)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "prometheus"}})
    await rbac.create_cluster_role_binding(
        {
            "metadata": {"name": f"{namespace}-metrics-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        }
    )
    answer = await core.create_namespaced_service_account_token(
        "prometheus", namespace, {"spec": {"expirationSeconds": 600}}
    )
    return str(answer.status.token)


async def test_run_serves_probes_and_metrics_and_stops_on_sigterm(
    control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    metrics, probes = free_port(), free_port()
    token = await scraper_token(api_client, namespace)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "components.cli",
        "run",
        "--kubeconfig",
        str(control_plane.kubeconfig),
        "--namespace",
        namespace,
        "--metrics-bind-address",
        f"127.0.0.1:{metrics}",
        "--health-probe-bind-address",
        f"127.0.0.1:{probes}",
        "--leader-elect",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with aiohttp.ClientSession() as session:

            async def ready() -> bool:
                return (await get(session, f"http://127.0.0.1:{probes}/readyz"))[0] == 200

            await eventually(ready, "/readyz to answer 200")
            assert (await get(session, f"http://127.0.0.1:{probes}/healthz"))[0] == 200
            # Secure by default: HTTPS, and only for a scraper RBAC allows.
            assert (await get(session, f"https://127.0.0.1:{metrics}/metrics"))[0] == 401

            async def scraped() -> bool:
                url = f"https://127.0.0.1:{metrics}/metrics"
                return (await get(session, url, token))[0] == 200

            await eventually(scraped, "the metrics reader to scrape")
            status, text = await get(session, f"https://127.0.0.1:{metrics}/metrics", token)
            assert status == 200
            assert "gpu_operator_reconciliation_status" in text
            for controller in (
                "clusterpolicy-controller",
                "nvidia-driver-controller",
                "node-labeling-controller",
                "upgrade-controller",
            ):
                assert (
                    f'controller_runtime_max_concurrent_reconciles{{controller="{controller}"}}'
                    in text
                )
            assert "process_resident_memory_bytes" in text
            assert "process_start_time_seconds" in text
            assert "_created" not in text
        lease = await client.CoordinationV1Api(api_client).read_namespaced_lease(
            LEASE_NAME, namespace
        )
        assert lease.spec.holder_identity
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            output, _ = await process.communicate()
        assert process.returncode == 0, output.decode()[-2000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_config_manager_is_accepted_by_the_api_server(
    api_client: client.ApiClient, namespace: str
) -> None:
    """config/manager passes the API server's validation (a server-side dry run)."""
    documents = load_documents(
        p
        for p in sorted((REPO / "config" / "manager").glob("*.yaml"))
        if p.name != "kustomization.yaml"
    )
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    for doc in documents:
        if doc["kind"] == "Namespace":
            # Another test (the kustomize install) may have created it for real: dry-run a
            # namespace of another name, so the manifest is still validated whole.
            doc["metadata"]["name"] = f"{namespace}-dry-run"
            await core.create_namespace(doc, dry_run="All")
            continue
        doc["metadata"]["namespace"] = namespace
        if doc["kind"] == "Deployment":
            await apps.create_namespaced_deployment(namespace, doc, dry_run="All")
        elif doc["kind"] == "Service":
            await core.create_namespaced_service(namespace, doc, dry_run="All")
        else:
            raise AssertionError(f"unexpected {doc['kind']} in config/manager")
