"""The simulated cluster's components beyond etcd and kube-apiserver.

kube-controller-manager (DaemonSets, ReplicaSets, garbage collection, node lifecycle, taint
eviction, ...), kube-scheduler, kwok (kubelets for the nodes carrying its annotation) and
the GPU node behaviour process, started beside a running `ControlPlane` and stopped
together.
"""

from __future__ import annotations

import logging
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import gpusim
from gpusim._binaries import SimBinaries
from gpusim._errors import SimError
from gpusim._nodes import KWOK_ANNOTATION, KWOK_ANNOTATION_VALUE
from reconciler.envtest import ControlPlane, Process, free_port, stop_together

log = logging.getLogger(__name__)

# Controllers a kubelet-less cluster needs for workloads to really roll out and be evicted.
KCM_CONTROLLERS = (
    "daemonset-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "job-controller",
    "cronjob-controller",
    "ttl-after-finished-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "clusterrole-aggregation-controller",
    "node-lifecycle-controller",
    "resourceclaim-controller",
    "taint-eviction-controller",
    "pod-garbage-collector-controller",
    "disruption-controller",
)
_PORT_RETRIES = 3
_ADDRESS_IN_USE = "address already in use"


class Components:
    """The processes a kubelet-less cluster needs on top of its control plane.

    `processes` holds each started one by name, in start order; `on_process` hears of each
    pid as it starts (so `sim up` can record it before anything can go wrong).
    """

    def __init__(
        self,
        plane: ControlPlane,
        binaries: SimBinaries,
        *,
        mig_reconfigure_seconds: float,
        die_with_parent: bool,
        startup_timeout: float,
        on_process: Callable[[str, int], None],
    ) -> None:
        self._plane = plane
        self._binaries = binaries
        self._mig_seconds = mig_reconfigure_seconds
        self._die_with_parent = die_with_parent
        self._startup_timeout = startup_timeout
        self._on_process = on_process
        self.processes: dict[str, Process] = {}
        self._component_ports: dict[str, int] = {}

    def start(self, stages: Sequence[Path]) -> None:
        """Launch them side by side, then wait until each is healthy (and the node
        behaviour has synced); a component that loses a race for its port is moved."""
        plane = self._plane
        assert plane.pki is not None
        kubeconfig = str(plane.kubeconfig)
        auth = [
            f"--kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
        ]
        kcm = [
            str(self._binaries.kube_controller_manager),
            *auth,
            f"--controllers={','.join(KCM_CONTROLLERS)}",
            "--use-service-account-credentials=false",
            f"--service-account-private-key-file={plane.pki.sa_private_key}",
            f"--root-ca-file={plane.pki.ca_cert}",
            f"--cert-dir={plane.workdir / 'kube-controller-manager'}",
            "--concurrent-daemonset-syncs=4",
            "--concurrent-replicaset-syncs=4",
            "--concurrent-gc-syncs=20",
            # kwok renews a thousand node leases on the same two cores as everything else and
            # falls behind under load, where a real kubelet would not; the default 50 s grace
            # then marks healthy nodes NotReady and their pods unready for good (kwok's
            # pod-ready stage only handles Pending pods). Give the simulated kubelets slack.
            "--node-monitor-grace-period=5m",
        ]
        scheduler = [
            str(self._binaries.kube_scheduler),
            *auth,
            f"--cert-dir={plane.workdir / 'kube-scheduler'}",
        ]
        kwok = [
            str(self._binaries.kwok),
            f"--kubeconfig={kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}={KWOK_ANNOTATION_VALUE}",
            "--node-lease-duration-seconds=40",
            "--v=WARN",  # INFO is a line per node patch and lease renewal
            *(f"--config={stage}" for stage in stages),
        ]
        # Launch everything, then wait: the components start up side by side.
        on_ports = {
            "kube-controller-manager": (kcm, "--secure-port="),
            "kube-scheduler": (scheduler, "--secure-port="),
            "kwok": (kwok, "--server-address=127.0.0.1:"),
        }
        urls = {name: self._launch_on_free_port(name, *spec) for name, spec in on_ports.items()}
        ready_file = plane.workdir / "gpu-node-behaviour.ready"
        ready_file.unlink(missing_ok=True)
        source_root = Path(gpusim.__file__).resolve().parent.parent
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(source_root), env.get("PYTHONPATH", "")) if p
        )
        env.pop("KUBECONFIG", None)
        behaviour = [
            sys.executable,
            "-m",
            "gpusim.gpu_node_behaviour",
            f"--kubeconfig={kubeconfig}",
            f"--mig-reconfigure-seconds={self._mig_seconds}",
            f"--ready-file={ready_file}",
        ]
        self._launch("gpu-node-behaviour", behaviour, env=env)
        for name, (argv, flag) in on_ports.items():
            for attempt in range(_PORT_RETRIES):
                healthy = partial(_healthy, urls[name])
                if self._wait(
                    name, healthy, "did not become healthy", fail=not attempt + 1 < _PORT_RETRIES
                ):
                    break
                if _ADDRESS_IN_USE not in self.processes[name].log_tail(200):
                    raise self._failure(name, "did not become healthy")
                # Another process took the port between our pick and its bind: again.
                self.processes[name].stop()
                urls[name] = self._launch_on_free_port(name, argv, flag)
        self._wait("gpu-node-behaviour", ready_file.exists, "did not finish its first sync")

    def _launch(
        self, name: str, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> Process:
        plane = self._plane
        process = Process(
            name,
            argv,
            plane.logs_dir / f"{name}.log",
            env=env,
            die_with_parent=self._die_with_parent,
        )
        process.start()
        self.processes[name] = process
        if process.pid is not None:
            self._on_process(name, process.pid)
        return process

    def _launch_on_free_port(self, name: str, argv: Sequence[str], flag: str) -> str:
        """Start a component on a free port; returns its health URL."""
        port = free_port()
        self._launch(name, [*argv, f"{flag}{port}"])
        self._component_ports[name] = port
        scheme = "http" if name == "kwok" else "https"
        return f"{scheme}://127.0.0.1:{port}/healthz"

    def _wait(self, name: str, ready: Callable[[], bool], what: str, *, fail: bool = True) -> bool:
        process = self.processes[name]
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline and process.alive():
            if ready():
                return True
            time.sleep(0.1)
        if not fail:
            return False
        raise self._failure(name, what)

    def _failure(self, name: str, what: str) -> SimError:
        process = self.processes[name]
        state = (
            f"exited with status {process.exit_code()}"
            if not process.alive()
            else f"{what} within {self._startup_timeout:.0f}s"
        )
        return SimError(f"{name} {state}; last lines of {process.log_path}:\n{process.log_tail()}")

    def stop(self) -> None:
        """Stop every process at once, within one shared 10 s (then SIGKILL)."""
        killed = stop_together(self.processes.values())
        if killed:
            log.warning("killed %s: still running 10 s after SIGTERM", ", ".join(killed))
        self.processes.clear()


def _healthy(url: str) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(
            url, timeout=2, context=context if url.startswith("https") else None
        ) as response:
            return bool(response.read().strip() == b"ok")
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False
