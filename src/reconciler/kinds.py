"""The built-in Kubernetes kinds controllers name (as `GVK`s), so a typo is a NameError."""

from reconciler._kinds import (
    CONFIG_MAP,
    CONTROLLER_REVISION,
    CRD,
    DAEMONSET,
    EVENT,
    NODE,
    PDB,
    POD,
)

__all__ = [
    "CONFIG_MAP",
    "CONTROLLER_REVISION",
    "CRD",
    "DAEMONSET",
    "EVENT",
    "NODE",
    "PDB",
    "POD",
]
