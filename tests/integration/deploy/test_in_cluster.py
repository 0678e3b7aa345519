"""`gpu-operator run` as in its pod: no kubeconfig, only what a kubelet gives a pod
(KUBERNETES_SERVICE_HOST/PORT; the ServiceAccount's token, ca.crt and namespace files), and
the shipped RBAC (config/rbac) on a real API server. The token is the API server's own
(TokenRequest) for the operator's ServiceAccount.

The kubelet rotates that token file; here the file gets a new token, then the first one is
revoked for real (it was bound to a Secret, which is deleted), and the operator has to read
the new one and go on: keep its leader lease and reconcile a change to the policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from components.controllers import LEASE_NAME
from gpusim import apply_crds, load_documents
from reconciler import GVK, Cache, Client
from reconciler.envtest import ControlPlane, free_port
from reconciler.lowlevel import RESTMapper, Transport
from tests.integration.components._accounts import install_operator
from tests.integration.components.controllers.conftest import (
    CLUSTER_POLICY,
    DAEMONSET,
    MANAGED,
    NAMESPACED_KINDS,
    NODE,
    clean_slate,
    node_manifest,
)
from tests.polling import eventually
from tests.tools import REPO

pytestmark = pytest.mark.integration

LEASE = GVK("coordination.k8s.io", "v1", "Lease")
NEW_VERSION = "600.10.01"


@pytest.fixture
async def admin(api_client: client.ApiClient) -> AsyncIterator[Client]:
    transport = Transport(api_client)
    mapper = RESTMapper(transport)
    yield Client(transport, mapper, Cache(transport, mapper), field_manager="in-cluster-check")


async def token_for(
    api: client.ApiClient, account: str, namespace: str, bound_to: Any = None
) -> str:
    """A token for the ServiceAccount from the API server's TokenRequest API; bound to a
    Secret, it is valid only while that Secret exists."""
    spec: dict[str, Any] = {"expirationSeconds": 3600}
    if bound_to is not None:
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "name": bound_to.metadata.name,
            "uid": bound_to.metadata.uid,
        }
    answer = await client.CoreV1Api(api).create_namespaced_service_account_token(
        account, namespace, {"spec": spec}
    )
    return str(answer.status.token)


def write_atomically(path: Path, text: str) -> None:
    """As the kubelet updates a projected volume: a reader sees the old file or the new."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    os.replace(staged, path)


async def status_of(control_plane: ControlPlane, token: str) -> int:
    """What the API server answers a request made with `token`."""
    assert control_plane.pki is not None
    context = ssl.create_default_context(cafile=str(control_plane.pki.ca_cert))
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{control_plane.api_url}/api",
            headers={"Authorization": f"Bearer {token}"},
            ssl=context,
        ) as response,
    ):
        return response.status


async def test_run_in_cluster_under_the_shipped_rbac_through_a_token_rotation(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    admin: Client,
    tmp_path: Path,
) -> None:
    await apply_crds(api_client, load_documents(sorted((REPO / "config" / "crd").glob("*.yaml"))))
    namespace = f"in-cluster-{uuid.uuid4().hex[:6]}"
    # The shipped account name: the admission policies (config/rbac) bound it by name.
    account = "gpu-operator"
    node, policy = f"{namespace}-gpu", f"{namespace}-policy"
    mount = tmp_path / "serviceaccount"
    log_path = tmp_path / "operator.log"
    core = client.CoreV1Api(api_client)
    process: asyncio.subprocess.Process | None = None

    def exited() -> str:
        code = process.returncode if process is not None else None
        return f"the operator exited {code}:\n{log_path.read_text()[-3000:]}"

    async def driver_image() -> str | None:
        assert process is not None and process.returncode is None, exited()
        for ds in await admin.list_live(DAEMONSET, namespace=namespace):
            if ds["metadata"]["name"].startswith("nvidia-driver-daemonset"):
                return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])
        return None

    async def renewed_after(time: str) -> str | None:
        assert process is not None and process.returncode is None, exited()
        lease = await admin.get_live(LEASE, LEASE_NAME, namespace)
        renewed = str(lease["spec"].get("renewTime") or "")
        return renewed if renewed > time else None

    try:
        await install_operator(admin, namespace, prefix=namespace)
        await clean_slate(admin)
        await admin.create(node_manifest(node))
        await admin.create(
            {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": policy}}
        )
        holder = await core.create_namespaced_secret(namespace, {"metadata": {"name": "holder"}})
        first = await token_for(api_client, account, namespace, bound_to=holder)
        mount.mkdir()
        assert control_plane.pki is not None
        (mount / "ca.crt").write_bytes(control_plane.pki.ca_cert.read_bytes())
        (mount / "namespace").write_text(namespace)
        write_atomically(mount / "token", first)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),  # no ~/.kube/config to fall back on
            "PYTHONUNBUFFERED": "1",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(control_plane.apiserver_port),
            "GPU_OPERATOR_SERVICEACCOUNT_DIR": str(mount),
            "OPERATOR_NAMESPACE": namespace,
        }
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "components.cli",
                "run",
                "--leader-elect",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{free_port()}",
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
            )

        # Reconciled with the first token: the policy's status, its DaemonSets, the node.
        image = await eventually(driver_image, "the driver DaemonSet", 120)
        assert NEW_VERSION not in image

        async def status_written() -> bool:
            live = await admin.get_live(CLUSTER_POLICY, policy)
            return bool((live.get("status") or {}).get("state"))

        await eventually(status_written, "the ClusterPolicy's status.state")

        async def labelled() -> bool:
            labels = (await admin.get_live(NODE, node))["metadata"]["labels"]
            return bool(labels.get("nvidia.com/gpu.present") == "true")

        await eventually(labelled, "the node labelled nvidia.com/gpu.present=true")

        # Rotated: the file holds a new token, then the first stops being valid.
        write_atomically(mount / "token", await token_for(api_client, account, namespace))
        await core.delete_namespaced_secret("holder", namespace)
        await eventually(lambda: rejected(control_plane, first), "the first token rejected")
        lease = await admin.get_live(LEASE, LEASE_NAME, namespace)
        revoked_at = str(lease["spec"]["renewTime"])

        # Still leading (renewals after the first token was refused), and reconciling.
        await eventually(lambda: renewed_after(revoked_at), "a lease renewal after revocation")
        await admin.patch(CLUSTER_POLICY, policy, {"spec": {"driver": {"version": NEW_VERSION}}})

        async def upgraded() -> bool:
            return NEW_VERSION in (await driver_image() or "")

        await eventually(upgraded, f"the driver DaemonSet at {NEW_VERSION}", 120)
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await process.wait()
        assert process.returncode == 0, exited()
        assert "Traceback" not in log_path.read_text()
    finally:
        if process is not None and process.returncode is None:
            process.kill()
            await process.wait()
        await clean_up(admin, api_client, namespace, node)


async def rejected(control_plane: ControlPlane, token: str) -> bool:
    return await status_of(control_plane, token) == 401


async def clean_up(admin: Client, api: client.ApiClient, namespace: str, node: str) -> None:
    """What this test made, on a control plane the session shares and no garbage collector
    tidies: the policy and its objects, the node, the RBAC and the namespace."""
    await clean_slate(admin)
    await admin.delete(NODE, node, missing_ok=True)
    for gvk in NAMESPACED_KINDS:
        for obj in await admin.list_live(gvk, namespace=namespace, label_selector=MANAGED):
            await admin.delete(gvk, obj["metadata"]["name"], namespace=namespace, missing_ok=True)
    rbac = client.RbacAuthorizationV1Api(api)
    for binding in (await rbac.list_cluster_role_binding()).items:
        if binding.metadata.name.startswith(namespace):
            await rbac.delete_cluster_role_binding(binding.metadata.name)
    for role in (await rbac.list_cluster_role()).items:
        if role.metadata.name.startswith(namespace):
            await rbac.delete_cluster_role(role.metadata.name)
    with contextlib.suppress(client.ApiException):
        await client.CoreV1Api(api).delete_namespace(namespace)
