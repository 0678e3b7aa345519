"""Finding the API server without the generated client: kubeconfigs as kubectl reads them
(data or files beside the kubeconfig, tokens, token files that rotate), in-cluster service
accounts, clear errors naming the field, and kubernetes_asyncio only for exec plugins."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import ApiConnection, KubeconfigError, connect
from reconciler._kubeconfig import in_cluster_connection, load_kubeconfig, service_account_dir
from reconciler.envtest._pki import Pki, generate
from reconciler.lowlevel import TokenFile, Transport

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return generate(tmp_path_factory.mktemp("pki"), ["127.0.0.1"])


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write(tmp: Path, cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
        **extra,
    }
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_certificates_as_data(pki: Pki, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "server": "https://127.0.0.1:6443/",
            "certificate-authority-data": b64(pki.ca_cert),
            "tls-server-name": "kubernetes",
            "proxy-url": "http://proxy:3128",
        },
        {
            "client-certificate-data": b64(pki.admin_cert),
            "client-key-data": b64(pki.admin_key),
        },
    )
    conn = load_kubeconfig(path)
    assert isinstance(conn, ApiConnection)
    assert conn.host == "https://127.0.0.1:6443"
    assert conn.tls_server_name == "kubernetes" and conn.proxy == "http://proxy:3128"
    assert conn.ssl_context is not None
    assert conn.ssl_context.get_ca_certs(), "the cluster's CA is what it trusts"
    transport = Transport(conn)
    assert transport.host == conn.host and transport.connection is conn


async def test_files_are_relative_to_the_kubeconfig_and_a_token_is_a_bearer(
    pki: Pki, tmp_path: Path
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "ca.pem").write_bytes(pki.ca_cert.read_bytes())
    path = write(
        tmp_path,
        {"server": "https://10.0.0.1:443", "certificate-authority": "certs/ca.pem"},
        {"token": "abc"},
    )
    conn = load_kubeconfig(path)
    assert conn is not None and conn.ssl_context is not None
    assert await conn.auth_headers() == {"Authorization": "Bearer abc"}


async def test_a_token_file_is_read_again_after_rotation(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    now = [0.0]
    source = TokenFile(token, clock=lambda: now[0])
    assert await source.headers() == {"Authorization": "Bearer first"}
    token.write_text("second")
    now[0] = 30.0
    assert await source.headers() == {"Authorization": "Bearer first"}, "read once a minute"
    now[0] = 61.0
    assert await source.headers() == {"Authorization": "Bearer second"}
    token.write_text("")  # caught mid-rotation
    now[0] = 130.0
    assert await source.headers() == {"Authorization": "Bearer second"}


async def test_a_rejected_token_file_is_read_again_before_the_next_request(
    tmp_path: Path,
) -> None:
    token = tmp_path / "token"
    token.write_text("first")
    source = TokenFile(token, clock=lambda: 0.0)  # never a minute later
    sent = await source.headers()
    token.write_text("second")
    source.rejected({"Authorization": "Bearer stale"})  # a token it no longer holds
    assert await source.headers() == sent
    source.rejected(sent)
    assert await source.headers() == {"Authorization": "Bearer second"}
    source.rejected(sent)  # the 401 of a request sent before the new token was read
    token.write_text("third")
    assert await source.headers() == {"Authorization": "Bearer second"}


def test_plain_http_and_a_token_file_beside_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    path = write(tmp_path, {"server": "http://127.0.0.1:8080"}, {"tokenFile": "token"})
    conn = load_kubeconfig(path)
    assert conn is not None and conn.ssl_context is None
    assert isinstance(conn.credentials, TokenFile)
    assert conn.credentials.path == (tmp_path / "token").resolve()


@pytest.mark.parametrize(
    ("cluster", "user", "extra", "says"),
    [
        ({"server": "https://h"}, {}, {"current-context": ""}, "current-context is not set"),
        ({"server": "https://h"}, {}, {"current-context": "nope"}, "no context named 'nope'"),
        ({}, {}, {}, "cluster 'c' has no server"),
        (
            {"server": "https://h", "certificate-authority-data": "%%%"},
            {},
            {},
            "certificate-authority-data is not base64",
        ),
        (
            {"server": "https://h", "certificate-authority": "missing.pem"},
            {},
            {},
            "certificate-authority",
        ),
        ({"server": "https://h"}, {"username": "a", "password": "b"}, {}, "username/password"),
        ({"server": "https://h"}, {"tokenFile": "gone"}, {}, "tokenFile"),
    ],
)
def test_a_bad_kubeconfig_names_the_field(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], extra: dict[str, Any], says: str
) -> None:
    path = write(tmp_path, cluster, user, **extra)
    with pytest.raises(KubeconfigError, match=says) as caught:
        load_kubeconfig(path)
    assert str(path) in str(caught.value)


def test_a_certificate_without_its_key_is_refused(pki: Pki, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"server": "https://h", "certificate-authority-data": b64(pki.ca_cert)},
        {"client-certificate-data": b64(pki.admin_cert)},
    )
    with pytest.raises(KubeconfigError, match="client-key"):
        load_kubeconfig(path)


def test_a_key_that_is_not_the_certificates_is_refused(pki: Pki, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"server": "https://h", "certificate-authority-data": b64(pki.ca_cert)},
        {
            "client-certificate-data": b64(pki.admin_cert),
            "client-key-data": b64(pki.serving_key),
        },
    )
    with pytest.raises(KubeconfigError, match="do not form a certificate and its key"):
        load_kubeconfig(path)


async def test_exec_plugins_go_to_kubernetes_asyncio(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.sh"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
    plugin.write_text(f"#!/bin/sh\necho '{json.dumps(credential)}'\n")
    plugin.chmod(0o755)
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    path = write(tmp_path, {"server": "https://127.0.0.1:6443"}, exec_user)
    assert load_kubeconfig(path) is None
    api = await connect(str(path))
    try:
        assert type(api).__module__.startswith("kubernetes_asyncio")
        transport = Transport(api)
        assert transport.host == "https://127.0.0.1:6443"
        headers = await transport.connection.auth_headers()
        assert {k.lower(): v for k, v in headers.items()} == {"authorization": "Bearer from-exec"}
    finally:
        await api.close()


async def test_no_kubeconfig_anywhere_says_how_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(KubeconfigError, match="pass --kubeconfig, set KUBECONFIG"):
        await connect()


async def test_in_cluster(pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeconfigError, match="automountServiceAccountToken"):
        in_cluster_connection(account)
    (account / "token").write_text("pod-token")
    conn = in_cluster_connection(account)
    assert conn.host == "https://[fd00::1]:443"
    assert await conn.auth_headers() == {"Authorization": "Bearer pod-token"}


async def test_in_cluster_files_come_from_the_standard_mount_unless_the_env_names_another(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPU_OPERATOR_SERVICEACCOUNT_DIR", raising=False)
    assert service_account_dir() == Path("/var/run/secrets/kubernetes.io/serviceaccount")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("GPU_OPERATOR_SERVICEACCOUNT_DIR", str(tmp_path))
    with pytest.raises(KubeconfigError, match=f"GPU_OPERATOR_SERVICEACCOUNT_DIR={tmp_path}"):
        await connect()
    (tmp_path / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    (tmp_path / "token").write_text("mounted-elsewhere")
    conn = await connect()
    assert isinstance(conn, ApiConnection) and conn.host == "https://10.0.0.1:443"
    assert await conn.auth_headers() == {"Authorization": "Bearer mounted-elsewhere"}


def test_the_operator_never_imports_the_generated_client() -> None:
    """Its models and API classes cost ~63 MiB of resident memory that nothing reads."""
    code = (
        "import sys, components.run, components.controllers, components.hooks,"
        " components.nodeagent._process\n"
        "print('kubernetes_asyncio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
