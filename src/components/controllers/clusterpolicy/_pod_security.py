"""`spec.psa.enabled`: the operator's own namespace carries the Pod Security Admission
labels its operands need (`POD_SECURITY_LABELS`, `privileged` for enforce, audit and warn),
as the reference's operator sets them.

The namespace is read at the first reconcile of a policy with `psa.enabled` (in this
process) and again whenever it turns back on, not on every reconcile: the operator cannot
watch Namespaces (its Role reaches only its own namespace object, by name, and a watch is a
cluster-wide list). Labels that are
already there are left alone; only those missing or at another level are written, in one
merge patch, so other labels and a higher level set on purpose elsewhere stay as they are.
"""

from __future__ import annotations

import logging

from components.api import POD_SECURITY_LABELS, ClusterPolicy
from components.controllers._apply import Change
from reconciler import GVK, Client, labels_of
from reconciler.errors import Forbidden, NotFound

log = logging.getLogger("components.controllers.pod_security")

NAMESPACE = GVK("", "v1", "Namespace")
COMPONENT = "pod-security"
"""How the Change (and so the policy's Event) names this step."""
FAILED = "PodSecurityLabelsFailed"
"""The policy's condition reason when the namespace could not be read or labelled."""


class NamespacePodSecurity:
    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._checked = False
        """The labels were found (or written) since psa.enabled last turned on."""

    async def ensure(self, policy: ClusterPolicy) -> tuple[list[Change], list[tuple[str, str]]]:
        """Label the namespace if the policy asks for it and a label is missing: what
        changed, and a problem for the policy's status when the API server refused."""
        if not policy.spec.psa.enabled:
            self._checked = False
            return [], []
        if self._checked:
            return [], []
        try:
            changes = await self._label()
        except (Forbidden, NotFound) as exc:
            return [], [
                (
                    FAILED,
                    f"spec.psa.enabled: could not label namespace {self.namespace} "
                    f"({exc.message}); grant the operator get and patch on its own namespace "
                    "(config/rbac/role.yaml) or set psa.enabled to false and label it yourself",
                )
            ]
        self._checked = True
        return changes, []

    async def _label(self) -> list[Change]:
        namespace = await self.client.get_live(NAMESPACE, self.namespace)
        labels = labels_of(namespace)
        missing = {k: v for k, v in POD_SECURITY_LABELS.items() if labels.get(k) != v}
        if not missing:
            return []
        body = {"metadata": {"labels": missing}}
        await self.client.patch(NAMESPACE, self.namespace, body, quiet=True)
        log.info(
            "namespace %s: labelled %s (spec.psa.enabled)",
            self.namespace,
            ", ".join(f"{k}={v}" for k, v in sorted(missing.items())),
        )
        return [Change("updated", f"Namespace {self.namespace}", COMPONENT)]
