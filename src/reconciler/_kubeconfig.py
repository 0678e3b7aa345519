"""Finding the API server and our credentials: in-cluster, or from a kubeconfig.

In its pod the operator uses its service account (the token file the kubelet rotates, the
cluster CA, `KUBERNETES_SERVICE_HOST`); outside, a kubeconfig's current context with
certificates, a token or a token file, read here into an `ApiConnection`.

A kubeconfig user authenticating through an `exec` plugin or an `auth-provider` (cloud
logins) is handed to kubernetes_asyncio, which implements those protocols (running the
plugin, caching and refreshing its credential); only then is that package imported.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler._connection import (
    ApiConnection,
    Credentials,
    NoCredentials,
    StaticToken,
    TokenFile,
)
from reconciler._exceptions import ReconcilerError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_DIR_ENV = "GPU_OPERATOR_SERVICEACCOUNT_DIR"
"""Read the in-cluster `token` and `ca.crt` from this directory instead of SERVICE_ACCOUNT:
for tests (which cannot write there) and pods that mount the token elsewhere. Ours alone:
client-go has no such setting."""
DEFAULT_KUBECONFIG = Path("~/.kube/config")


class KubeconfigError(ReconcilerError):
    """The kubeconfig (or the in-cluster environment) cannot say how to reach the server;
    the message names the file and the field."""


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def service_account_dir() -> Path:
    """Where the pod's service account is mounted: SERVICE_ACCOUNT, unless
    $GPU_OPERATOR_SERVICEACCOUNT_DIR says otherwise."""
    return Path(os.environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT)


def in_cluster_connection(account: Path | None = None) -> ApiConnection:
    """The service account's view: the server at KUBERNETES_SERVICE_HOST:PORT, trusted by
    the cluster CA, with the pod's (rotated) token, from `account` (default:
    `service_account_dir()`)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise KubeconfigError("not in a cluster: KUBERNETES_SERVICE_HOST is not set")
    account = account or service_account_dir()
    named = os.environ.get(SERVICE_ACCOUNT_DIR_ENV)
    token, ca = account / "token", account / "ca.crt"
    for path in (token, ca):
        if not path.is_file():
            raise KubeconfigError(
                f"{path} is missing: {SERVICE_ACCOUNT_DIR_ENV}={named} names a directory "
                "without the service account's token and ca.crt"
                if named and account == Path(named)
                else f"{path} is missing: is automountServiceAccountToken off for this pod?"
            )
    if ":" in host:  # IPv6
        host = f"[{host}]"
    context = ssl.create_default_context(cafile=str(ca))
    return ApiConnection(
        f"https://{host}:{port}", ssl_context=context, credentials=TokenFile(token)
    )


def kubeconfig_paths(explicit: str | None) -> list[Path]:
    """The files to read, as kubectl picks them: the flag, else $KUBECONFIG (a list),
    else ~/.kube/config."""
    if explicit:
        return [Path(explicit).expanduser()]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return [Path(p).expanduser() for p in listed]
    return [DEFAULT_KUBECONFIG.expanduser()]


def load_kubeconfig(path: Path) -> ApiConnection | None:
    """The current context of `path` as a connection; None when its user authenticates
    through an exec plugin or an auth provider (see the module's docstring)."""
    where = str(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {where}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {where} is not YAML: {exc}") from None
    if not isinstance(doc, Mapping):
        raise KubeconfigError(f"kubeconfig {where} is not a mapping")
    context_name = doc.get("current-context")
    if not context_name:
        raise KubeconfigError(f"kubeconfig {where}: current-context is not set")
    context = _named(doc, "contexts", "context", context_name, where)
    cluster = _named(doc, "clusters", "cluster", context.get("cluster"), where)
    user_name = context.get("user")
    user = _named(doc, "users", "user", user_name, where) if user_name else {}
    if user.get("exec") or user.get("auth-provider"):
        return None
    base = path.parent
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(
            f"kubeconfig {where}: cluster {context.get('cluster')!r} has no server"
        )
    ssl_context: ssl.SSLContext | None = None
    if str(server).startswith("https://"):
        ssl_context = _tls(cluster, user, base, where)
    return ApiConnection(
        str(server),
        ssl_context=ssl_context,
        credentials=_credentials(user, base, where),
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
    )


def _named(doc: Mapping[str, Any], section: str, key: str, name: Any, where: str) -> dict[str, Any]:
    for entry in doc.get(section) or ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            found = entry.get(key)
            if isinstance(found, Mapping):
                return dict(found)
            raise KubeconfigError(f"kubeconfig {where}: {section}[{name!r}] has no {key}")
    raise KubeconfigError(f"kubeconfig {where}: no {section[:-1]} named {name!r} in {section}")


def _pem(entry: Mapping[str, Any], field: str, base: Path, where: str) -> tuple[bytes | None, str]:
    """The PEM bytes of `field` (a path relative to the kubeconfig) or `field-data`
    (base64), and which of the two it came from, for messages."""
    data = entry.get(f"{field}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True), f"{field}-data"
        except ValueError:
            raise KubeconfigError(f"kubeconfig {where}: {field}-data is not base64") from None
    name = entry.get(field)
    if name:
        file = (base / Path(name).expanduser()).resolve()
        try:
            return file.read_bytes(), f"{field} ({file})"
        except OSError as exc:
            raise KubeconfigError(f"kubeconfig {where}: {field} {file}: {exc.strerror}") from None
    return None, field


def _tls(
    cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path, where: str
) -> ssl.SSLContext:
    ca, ca_field = _pem(cluster, "certificate-authority", base, where)
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        try:
            context = ssl.create_default_context(cadata=ca.decode() if ca else None)
        except (ssl.SSLError, ValueError) as exc:
            raise KubeconfigError(f"kubeconfig {where}: {ca_field}: not a PEM CA ({exc})") from None
    cert, cert_field = _pem(user, "client-certificate", base, where)
    key, key_field = _pem(user, "client-key", base, where)
    if bool(cert) != bool(key):
        missing = "client-key" if cert else "client-certificate"
        raise KubeconfigError(f"kubeconfig {where}: {missing} (or {missing}-data) is missing")
    if cert and key:
        # The ssl module loads a certificate chain from files only: write them where no
        # one else can read them, for as long as the load takes.
        with tempfile.TemporaryDirectory(prefix="kubeconfig-") as tmp:
            cert_file, key_file = Path(tmp, "cert.pem"), Path(tmp, "key.pem")
            for file, content in ((cert_file, cert), (key_file, key)):
                file.touch(mode=0o600)
                file.write_bytes(content)
            try:
                context.load_cert_chain(cert_file, key_file)
            except ssl.SSLError as exc:
                raise KubeconfigError(
                    f"kubeconfig {where}: {cert_field} and {key_field} do not form a "
                    f"certificate and its key ({exc.reason or exc})"
                ) from None
    return context


def _credentials(user: Mapping[str, Any], base: Path, where: str) -> Credentials:
    token = user.get("token")
    if token:
        return StaticToken(str(token))
    token_file = user.get("tokenFile")
    if token_file:
        file = (base / Path(token_file).expanduser()).resolve()
        if not file.is_file():
            raise KubeconfigError(f"kubeconfig {where}: tokenFile {file} does not exist")
        return TokenFile(file)
    if user.get("username") or user.get("password"):
        raise KubeconfigError(
            f"kubeconfig {where}: basic authentication (username/password) was removed from "
            "Kubernetes in 1.19; use a token or a client certificate"
        )
    return NoCredentials()


async def connect(kubeconfig: str | None = None) -> Any:
    """How to reach the API server: `kubeconfig` if given, else in-cluster when in a pod,
    else $KUBECONFIG or ~/.kube/config. Returns an `ApiConnection`, or a kubernetes_asyncio
    `ApiClient` for the exec-plugin and auth-provider kubeconfigs it alone understands
    (every `Transport` takes either); use it as `async with`."""
    if not kubeconfig and in_cluster():
        return in_cluster_connection()
    paths = kubeconfig_paths(kubeconfig)
    existing = [p for p in paths if p.is_file()]
    if not existing:
        raise KubeconfigError(
            f"no kubeconfig at {os.pathsep.join(map(str, paths))}: pass --kubeconfig, set "
            "KUBECONFIG, or run in a pod"
        )
    if len(existing) == 1:
        found = load_kubeconfig(existing[0])
        if found is not None:
            return found
    # Several files to merge, or a user only kubernetes_asyncio can authenticate.
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    try:
        if len(existing) == 1:
            await config.load_kube_config(
                config_file=str(existing[0]), client_configuration=configuration
            )
        else:
            await config.load_kube_config(client_configuration=configuration)
    except config.ConfigException as exc:
        raise KubeconfigError(f"cannot load the kubeconfig: {exc}") from None
    return client.ApiClient(configuration)
