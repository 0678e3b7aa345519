"""An OCI distribution registry for the simulated cluster, on loopback.

go-containerregistry's in-memory registry (`hack/go/registry`, built by
`hack/build-binaries.sh`): the operator's pre-flight check asks it whether the driver
images the simulated nodes will pull exist, and tests push (or delete) images through its
API as a CI pipeline would. An image is a small OCI manifest (an empty config, no layers):
the simulated nodes never pull it, they read the driver version from the tag.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from gpusim._errors import SimError
from reconciler.envtest import Lifecycle, Process

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"


class SimulatedRegistry(Lifecycle):
    """One registry process; `address` is `127.0.0.1:<port>` once started. With `user`
    (and `password`) it answers 401 with a Basic challenge to requests without them; this
    class's own requests carry them."""

    def __init__(
        self,
        binary: Path,
        log_path: Path,
        *,
        die_with_parent: bool = True,
        startup_timeout: float = 30.0,
        user: str = "",
        password: str = "",
    ) -> None:
        self.binary = binary
        self.user, self.password = user, password
        credentials = ["-user", user, "-password", password] if user else []
        self.process = Process(
            "registry",
            [str(binary), "-address", "127.0.0.1:0", *credentials],
            log_path,
            die_with_parent=die_with_parent,
        )
        self._startup_timeout = startup_timeout
        self.address = ""

    def start(self) -> Self:
        if not self.binary.exists():
            raise SimError(
                f"the registry is missing at {self.binary}; run `bash hack/build-binaries.sh`"
            )
        self.process.start()
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline and self.process.alive():
            for line in self.process.log_tail(20).splitlines():
                if line.startswith("listening on "):
                    self.address = line.removeprefix("listening on ").strip()
                    return self
            time.sleep(0.05)
        tail = self.process.log_tail(20)
        self.process.stop()
        raise SimError(f"the registry did not start: {tail or 'no output'}")

    def stop(self) -> None:
        self.process.stop()

    def _url(self, path: str) -> str:
        return f"http://{self.address}/v2/{path}"

    def _send(self, method: str, url: str, body: bytes = b"", content_type: str = "") -> int:
        request = urllib.request.Request(url, data=body or None, method=method)
        if content_type:
            request.add_header("Content-Type", content_type)
        if self.user:
            token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def push(self, repository: str, tag: str) -> str:
        """Pushes a small image as `repository:tag`; returns its manifest digest."""
        config = json.dumps({"architecture": "amd64", "os": "linux", "tag": tag}).encode()
        config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
        status = self._send(
            "POST", self._url(f"{repository}/blobs/uploads/?digest={config_digest}"), config
        )
        if status not in (201, 202):
            raise SimError(f"the registry refused the config blob of {repository}:{tag}: {status}")
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
                "layers": [],
            }
        ).encode()
        status = self._send(
            "PUT", self._url(f"{repository}/manifests/{tag}"), manifest, MANIFEST_TYPE
        )
        if status != 201:
            raise SimError(f"the registry refused the manifest {repository}:{tag}: {status}")
        return "sha256:" + hashlib.sha256(manifest).hexdigest()

    def delete(self, repository: str, tag: str) -> None:
        self._send("DELETE", self._url(f"{repository}/manifests/{tag}"))

    def has(self, repository: str, tag: str) -> bool:
        return self._send("HEAD", self._url(f"{repository}/manifests/{tag}")) == 200

    def push_driver_images(
        self, version: str, os_tags: Iterable[str], *, repository: str = "nvidia/driver"
    ) -> list[str]:
        """The driver images `<version>-<os tag>` (as the driver operand renders them) for
        each OS tag; returns their references."""
        refs = []
        for os_tag in os_tags:
            self.push(repository, f"{version}-{os_tag}")
            refs.append(f"{self.address}/{repository}:{version}-{os_tag}")
        return refs
