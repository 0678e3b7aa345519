"""Pre-flight: before a node is touched for a driver change, is the image it will pull there?

Asked of the image's registry through the OCI distribution API (`RegistryClient`), with
the policy's image pull secrets (`docker_config_auths`, `credentials_for`), cached per
image (`ImageChecker`), and turned into which nodes may go on (`gate`)::

    checker = ImageChecker(on_change=requeue)
    check = checker.lookup("nvcr.io/nvidia/driver:580.95.05-rhel9", credentials)  # or None
    g = gate({"node-1": image}, {image: check}, mode="Warn")
    g.blocked, g.pending, g.condition()

Used by the upgrade walk at admission (`components.upgrade`); imports only `api`.
"""

from components.preflight._auth import (
    BasicAuth,
    Challenge,
    credentials_for,
    docker_config_auths,
    parse_challenge,
)
from components.preflight._cache import TTL, Credentials, ImageChecker
from components.preflight._client import MANIFEST_TYPES, Check, RegistryClient, Verdict
from components.preflight._gate import (
    CONDITION,
    EVENT_REASON,
    MISSING_REASON,
    PASSED_REASON,
    UNREACHABLE_REASON,
    Finding,
    Gate,
    gate,
)
from components.preflight._reference import ImageRef, ReferenceError, parse_reference

__all__ = [
    "CONDITION",
    "EVENT_REASON",
    "MANIFEST_TYPES",
    "MISSING_REASON",
    "PASSED_REASON",
    "TTL",
    "UNREACHABLE_REASON",
    "BasicAuth",
    "Challenge",
    "Check",
    "Credentials",
    "Finding",
    "Gate",
    "ImageChecker",
    "ImageRef",
    "ReferenceError",
    "RegistryClient",
    "Verdict",
    "credentials_for",
    "docker_config_auths",
    "gate",
    "parse_challenge",
    "parse_reference",
]
