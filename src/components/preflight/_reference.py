"""An image reference split the way the distribution API addresses it.

`nvcr.io/nvidia/driver:580.95.05-ubuntu22.04` is asked of `nvcr.io` as repository
`nvidia/driver`, manifest `580.95.05-ubuntu22.04`; a name with no registry host is Docker
Hub's (`library/` for a single path part), as kubelets resolve it.
"""

from __future__ import annotations

from dataclasses import dataclass

DOCKER_HUB = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})
_LOOPBACK = ("localhost", "127.", "[::1]")


class ReferenceError(ValueError):
    """The text is not an image reference the registry could be asked about."""


@dataclass(frozen=True, slots=True)
class ImageRef:
    host: str
    """The registry's host (and port) the API is asked at."""
    repository: str
    reference: str
    """The tag, or the `sha256:` digest."""
    text: str
    """The reference as written (what messages name)."""

    @property
    def insecure(self) -> bool:
        """A loopback registry is spoken to over plain HTTP, as container runtimes do."""
        return self.host.startswith(_LOOPBACK)

    @property
    def manifest_url(self) -> str:
        scheme = "http" if self.insecure else "https"
        return f"{scheme}://{self.host}/v2/{self.repository}/manifests/{self.reference}"

    @property
    def auth_hosts(self) -> tuple[str, ...]:
        """The keys a docker config may file this registry's credentials under."""
        if self.host == DOCKER_HUB:
            return ("index.docker.io", "docker.io", DOCKER_HUB)
        return (self.host,)


def parse_reference(text: str) -> ImageRef:
    """`host/path:tag`, `host/path@sha256:...`; Docker Hub when the first part is no host."""
    name = text.strip()
    if not name or any(c.isspace() for c in name):
        raise ReferenceError(f"{text!r} is not an image reference")
    if "@" in name:
        name, reference = name.split("@", 1)
        if not reference.startswith("sha256:"):
            raise ReferenceError(f"{text!r}: a digest must be sha256:<hex>")
        # A tag beside the digest is ignored by the runtime: the digest is what is pulled.
        last = name.rsplit("/", 1)
        if ":" in last[-1]:
            name = name[: len(name) - len(last[-1])] + last[-1].split(":", 1)[0]
    else:
        if ":" not in name.rsplit("/", 1)[-1]:
            raise ReferenceError(f"{text!r} has neither a tag nor a digest")
        name, reference = name.rsplit(":", 1)
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, rest
    else:
        host, repository = DOCKER_HUB, name
    if host in _DOCKER_HUB_ALIASES:
        host = DOCKER_HUB
        if "/" not in repository:
            repository = f"library/{repository}"
    if not repository or not reference:
        raise ReferenceError(f"{text!r} is not an image reference")
    return ImageRef(host=host, repository=repository, reference=reference, text=text.strip())
