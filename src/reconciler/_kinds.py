"""The built-in Kubernetes kinds the engine and its users name, defined once."""

from __future__ import annotations

from typing import Final

from reconciler._objects import GVK

NODE: Final = GVK("", "v1", "Node")
POD: Final = GVK("", "v1", "Pod")
EVENT: Final = GVK("", "v1", "Event")
CONFIG_MAP: Final = GVK("", "v1", "ConfigMap")
DAEMONSET: Final = GVK("apps", "v1", "DaemonSet")
CONTROLLER_REVISION: Final = GVK("apps", "v1", "ControllerRevision")
PDB: Final = GVK("policy", "v1", "PodDisruptionBudget")
CRD: Final = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
