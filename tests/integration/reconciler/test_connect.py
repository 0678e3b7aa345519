"""`connect` against a real API server: the kubeconfig's client certificate authenticates
us (we are in system:masters), the cluster CA is what the server is checked against, and
`insecure-skip-tls-verify` is the only way around it. A token file the server rejects is
read again at once."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client

from reconciler import ApiConnection, connect
from reconciler.envtest import ControlPlane
from reconciler.envtest._pki import generate
from reconciler.errors import ApiUnreachable, Unauthorized
from reconciler.lowlevel import TokenFile, Transport

pytestmark = pytest.mark.integration


async def test_the_kubeconfigs_certificate_reaches_the_server(control_plane: ControlPlane) -> None:
    async with await connect(str(control_plane.kubeconfig)) as conn:
        transport = Transport(conn)
        version = await transport.request("GET", "/version")
        assert version["gitVersion"].startswith("v1.")
        # Authenticated as the kubeconfig's user: a read anonymous users may not make.
        review = await transport.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert "system:masters" in review["status"]["userInfo"]["groups"]


def _with_ca_of_another_cluster(plane: ControlPlane, tmp_path: Path, *, skip: bool) -> Path:
    other = generate(tmp_path / "other-pki", ["127.0.0.1"])
    doc = yaml.safe_load(plane.kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    (tmp_path / "other-ca.pem").write_bytes(other.ca_cert.read_bytes())
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "other-ca.pem"
    if skip:
        cluster["insecure-skip-tls-verify"] = True
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


async def test_a_server_the_ca_did_not_sign_is_refused(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = _with_ca_of_another_cluster(control_plane, tmp_path, skip=False)
    async with await connect(str(path)) as conn:
        with pytest.raises(ApiUnreachable, match="certificate"):
            await Transport(conn).request("GET", "/version")


async def test_insecure_skip_tls_verify_is_honoured(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    path = _with_ca_of_another_cluster(control_plane, tmp_path, skip=True)
    async with await connect(str(path)) as conn:
        version = await Transport(conn).request("GET", "/version")
        assert version["major"] == "1"


async def test_a_token_the_server_rejects_is_read_again_from_its_file(
    control_plane: ControlPlane, api_client: client.ApiClient, tmp_path: Path
) -> None:
    """A token file whose token the server refuses (401) is read again before the next
    request, not a minute later: the clock here never moves."""
    core = client.CoreV1Api(api_client)
    namespace = f"token-{uuid.uuid4().hex[:6]}"
    await core.create_namespace({"metadata": {"name": namespace}})
    await core.create_namespaced_service_account(namespace, {"metadata": {"name": "reader"}})
    minted = await core.create_namespaced_service_account_token(
        "reader", namespace, {"spec": {"expirationSeconds": 600}}
    )
    token = tmp_path / "token"
    token.write_text("revoked-long-ago")
    connection = ApiConnection(
        control_plane.api_url,
        ssl_context=ssl.create_default_context(cafile=str(control_plane.pki.ca_cert)),
        credentials=TokenFile(token, clock=lambda: 0.0),
    )
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    transport = Transport(connection)
    try:
        with pytest.raises(Unauthorized):
            await transport.request("POST", path, body=review)
        token.write_text(str(minted.status.token))  # the kubelet's rotation
        answer = await transport.request("POST", path, body=review)
        assert answer["status"]["userInfo"]["username"] == (
            f"system:serviceaccount:{namespace}:reader"
        )
    finally:
        await transport.close()
        await connection.close()
        await core.delete_namespace(namespace)
