"""A real etcd + kube-apiserver on loopback, for tests, benchmarks and the simulated cluster.

Modelled on controller-runtime's envtest: free ports, its own CA, an admin client certificate
in `system:masters`, service-account signing keys, a kubeconfig, and a wait on `/readyz`.
Everything lives in one temporary folder that `stop()` removes.
"""

from __future__ import annotations

import atexit
import base64
import json
import shutil
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import yaml

from reconciler.envtest._binaries import Binaries
from reconciler.envtest._errors import ControlPlaneError
from reconciler.envtest._lifecycle import Lifecycle
from reconciler.envtest._pki import Pki, generate
from reconciler.envtest._process import Process

_PORT_RETRIES = 3
_ADDRESS_IN_USE = "address already in use"


def free_port() -> int:
    """A loopback port nobody listens on right now (the caller retries if it loses a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ControlPlane(Lifecycle):
    """etcd and kube-apiserver, started together and always torn down together.

    Use as a context manager, or call `start()` and `stop()`. `extra_apiserver_args` adds or
    overrides flags (for instance `--watch-cache=false`). With `die_with_parent=False` the
    processes outlive this Python process (the simulated cluster's `sim up` needs that) and
    `workdir` must be given, since it then holds their state. `apiserver_port` asks for a
    fixed port (0 = a free one); a fixed port that is taken fails at once with one sentence.
    """

    def __init__(
        self,
        *,
        workdir: Path | None = None,
        binaries: Binaries | None = None,
        extra_apiserver_args: Sequence[str] = (),
        die_with_parent: bool = True,
        startup_timeout: float = 90.0,
        apiserver_port: int = 0,
    ) -> None:
        self.binaries = binaries or Binaries.from_cache()
        self._owns_workdir = workdir is None
        self._workdir_arg = workdir
        self.workdir = Path()
        self._extra_args = list(extra_apiserver_args)
        self._die_with_parent = die_with_parent
        self._startup_timeout = startup_timeout
        self._fixed_apiserver_port = apiserver_port
        self.etcd_port = 0
        self.etcd_peer_port = 0
        self.apiserver_port = 0
        self.pki: Pki | None = None
        self.kubeconfig = Path()
        self.etcd: Process | None = None
        self.apiserver: Process | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def logs_dir(self) -> Path:
        return self.workdir / "logs"

    def start(self) -> Self:
        self.binaries.require("etcd", "kube-apiserver")
        began = time.monotonic()
        if self._workdir_arg is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="gpu-operator-envtest-"))
        else:
            self.workdir = self._workdir_arg
            self.workdir.mkdir(parents=True, exist_ok=True)
        if self._die_with_parent:
            atexit.register(self.stop)
        return self._started(began, self._start_processes)

    def _start_processes(self) -> None:
        self.pki = generate(
            self.workdir / "pki",
            ["127.0.0.1", "localhost", "10.0.0.1", "kubernetes.default.svc"],
        )
        self._start_etcd()
        self._start_apiserver_with_retries()
        self._write_kubeconfig()

    def stop(self) -> None:
        """Stop every process and remove the work folder; safe to call twice."""
        for process in (self.apiserver, self.etcd):
            if process is not None:
                process.stop()
        self.apiserver = None
        self.etcd = None
        if self._owns_workdir and self.workdir != Path() and self.workdir.exists():
            shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)

    # -- etcd --------------------------------------------------------------------------

    def _start_etcd(self) -> None:
        for attempt in range(_PORT_RETRIES):
            self.etcd_port, self.etcd_peer_port = free_port(), free_port()
            peer = f"http://127.0.0.1:{self.etcd_peer_port}"
            self.etcd = Process(
                "etcd",
                [
                    str(self.binaries.etcd),
                    "--name=envtest",
                    f"--data-dir={self.workdir / 'etcd'}",
                    f"--listen-client-urls={self.etcd_url}",
                    f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=envtest={peer}",
                    "--unsafe-no-fsync=true",
                    "--log-level=warn",
                ],
                self.logs_dir / "etcd.log",
                die_with_parent=self._die_with_parent,
            )
            self.etcd.start()
            if self._wait(self.etcd, self._etcd_healthy):
                return
            if attempt + 1 < _PORT_RETRIES and _ADDRESS_IN_USE in self.etcd.log_tail(200):
                self.etcd.stop()
                continue
            break
        raise self._not_ready(self.etcd)

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as response:
                return bool(json.load(response).get("health") == "true")
        except (OSError, ValueError):
            return False

    def stop_etcd(self) -> None:
        """Stop etcd (its data stays on disk), to test clients across a storage outage."""
        if self.etcd is not None:
            self.etcd.stop()

    def start_etcd(self, *, wait: bool = True) -> None:
        """Start etcd again on the same ports and data. As with `start_apiserver`, call it
        on the thread that should own the process; `wait=False` returns at once and
        `wait_etcd_healthy()` then waits, from any thread."""
        if self.etcd is None or self.etcd.alive():
            return
        self.etcd.start()
        if wait:
            self.wait_etcd_healthy()

    def wait_etcd_healthy(self) -> None:
        if self.etcd is None or not self._wait(self.etcd, self._etcd_healthy):
            raise self._not_ready(self.etcd)

    def etcd_call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST to etcd's JSON gateway (for example `/v3/kv/compaction`)."""
        request = urllib.request.Request(
            f"{self.etcd_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.load(response)
            return result

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now, so older resourceVersions answer 410 Gone."""
        status = self.etcd_call("/v3/maintenance/status", {})
        revision = int(status["header"]["revision"])
        self.etcd_call("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    # -- kube-apiserver ----------------------------------------------------------------

    def _apiserver_argv(self) -> list[str]:
        assert self.pki is not None
        pki = self.pki
        args = {
            "--advertise-address": "127.0.0.1",
            "--bind-address": "127.0.0.1",
            "--secure-port": str(self.apiserver_port),
            "--cert-dir": str(self.workdir / "pki"),
            "--tls-cert-file": str(pki.serving_cert),
            "--tls-private-key-file": str(pki.serving_key),
            "--client-ca-file": str(pki.ca_cert),
            "--etcd-servers": self.etcd_url,
            "--service-cluster-ip-range": "10.0.0.0/24",
            "--allow-privileged": "true",
            "--disable-admission-plugins": "ServiceAccount",
            "--authorization-mode": "RBAC",
            "--service-account-issuer": f"https://127.0.0.1:{self.apiserver_port}/",
            "--service-account-key-file": str(pki.sa_public_key),
            "--service-account-signing-key-file": str(pki.sa_private_key),
            "--endpoint-reconciler-type": "none",
        }
        for extra in self._extra_args:
            key, _, value = extra.partition("=")
            args[key] = value
        return [str(self.binaries.kube_apiserver)] + [f"{k}={v}" for k, v in args.items()]

    def _start_apiserver_with_retries(self) -> None:
        for attempt in range(_PORT_RETRIES):
            self.apiserver_port = self._fixed_apiserver_port or free_port()
            if self._launch_apiserver():
                return
            assert self.apiserver is not None
            if self._fixed_apiserver_port and _ADDRESS_IN_USE in self.apiserver.log_tail(200):
                raise ControlPlaneError(f"port {self.apiserver_port} is already in use")
            if (
                not self._fixed_apiserver_port
                and attempt + 1 < _PORT_RETRIES
                and _ADDRESS_IN_USE in self.apiserver.log_tail(200)
            ):
                self.apiserver.stop()
                continue
            break
        raise self._not_ready(self.apiserver)

    def _launch_apiserver(self) -> bool:
        self._spawn_apiserver()
        assert self.apiserver is not None
        return self._wait(self.apiserver, self._apiserver_ready)

    def _spawn_apiserver(self) -> None:
        self.apiserver = Process(
            "kube-apiserver",
            self._apiserver_argv(),
            self.logs_dir / "kube-apiserver.log",
            die_with_parent=self._die_with_parent,
        )
        self.apiserver.start()

    def stop_apiserver(self) -> None:
        """Stop only the apiserver (etcd keeps the data), to test clients across a restart."""
        if self.apiserver is not None:
            self.apiserver.stop()

    def start_apiserver(self, *, wait: bool = True) -> None:
        """Start the apiserver again on the same port, certificates and etcd.

        Call it on the thread that should own the process (it dies with that thread).
        `wait=False` returns as soon as the process runs, so a test's event loop keeps
        turning while it starts; `wait_apiserver_ready()`, from any thread, then waits."""
        if self.apiserver is not None and self.apiserver.alive():
            return
        if not wait:
            self._spawn_apiserver()
        elif not self._launch_apiserver():
            raise self._not_ready(self.apiserver)

    def wait_apiserver_ready(self) -> None:
        """Block until the apiserver started with `start_apiserver(wait=False)` is ready."""
        if self.apiserver is None or not self._wait(self.apiserver, self._apiserver_ready):
            raise self._not_ready(self.apiserver)

    def ssl_context(self) -> ssl.SSLContext:
        assert self.pki is not None
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        context.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return context

    def get(self, path: str, timeout: float = 5.0) -> bytes:
        """GET a path on the apiserver as the admin user."""
        with urllib.request.urlopen(
            f"{self.api_url}{path}", timeout=timeout, context=self.ssl_context()
        ) as response:
            body: bytes = response.read()
            return body

    def _apiserver_ready(self) -> bool:
        try:
            return self.get("/readyz", timeout=2) == b"ok"
        except (OSError, urllib.error.URLError, ssl.SSLError):
            return False

    def version(self) -> str:
        """The `gitVersion` the apiserver reports."""
        info = json.loads(self.get("/version"))
        return str(info["gitVersion"])

    # -- helpers -----------------------------------------------------------------------

    def _wait(self, process: Process, ready: Any) -> bool:
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if not process.alive():
                return False
            if ready():
                return True
            time.sleep(0.1)
        return False

    def _not_ready(self, process: Process | None) -> ControlPlaneError:
        if process is None:
            return ControlPlaneError("the control plane did not start")
        state = (
            f"exited with status {process.exit_code()}"
            if not process.alive()
            else f"was not ready within {self._startup_timeout:.0f}s"
        )
        return ControlPlaneError(
            f"{process.name} {state}; last lines of {process.log_path}:\n{process.log_tail()}"
        )

    def log_tails(self, lines: int = 40) -> dict[str, str]:
        """The last lines of each component's log, for a failing test's report."""
        tails: dict[str, str] = {}
        if self.logs_dir.exists():
            for log in sorted(self.logs_dir.glob("*.log")):
                text = log.read_text(errors="replace").splitlines()
                tails[log.stem] = "\n".join(text[-lines:])
        return tails

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "envtest",
                    "cluster": {
                        "server": self.api_url,
                        "certificate-authority-data": b64(self.pki.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": "envtest-admin",
                    "user": {
                        "client-certificate-data": b64(self.pki.admin_cert),
                        "client-key-data": b64(self.pki.admin_key),
                    },
                }
            ],
            "contexts": [
                {"name": "envtest", "context": {"cluster": "envtest", "user": "envtest-admin"}}
            ],
            "current-context": "envtest",
        }
        self.kubeconfig = self.workdir / "kubeconfig"
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)
