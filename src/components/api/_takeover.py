"""Taking over a cluster where NVIDIA's operator ran: which objects are the reference's, and
how its driver DaemonSet is fenced so nodes move to ours one walk at a time. Pure functions.

The reference's objects are owned by the same ClusterPolicy (an ownerReference with its uid)
but never carry our component label: that is what tells them apart, whatever their names.

Its driver pods cannot simply be swapped for ours: a driver is replaced only through the
upgrade walk. So before our driver DaemonSet can see a node, every node a reference driver
pod runs on gets `DRIVER_TAKEOVER_LABEL`; our driver DaemonSets require it absent, and the
reference's DaemonSet is *fenced*: it is made to require it present (and `OnDelete`, so the
edit restarts nothing). The label is the hand-over: when the walk has cordoned and cleared
the node, it removes the label, the DaemonSet controller deletes the reference's pod there
and ours schedules. The same shape as the precompiled kernel pin.

The fence also records the revisions its pods ran (`FENCED_REVISIONS_ANNOTATION`): a pod
at any other revision was created after the fence, in place of one that was deleted (the
admin restarting the node's driver, as an `OnDelete` driver is restarted), and gives way to
ours at once. The fenced template's own revision cannot be told apart otherwise: the
ControllerRevision that names it may reach a cache after the pod does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from components.api._affinity import template_pod_spec
from components.api._labels import COMPONENT_LABEL
from reconciler import annotations_of, labels_of, owner_references_of

DRIVER_TAKEOVER_LABEL: Final = "nvidia.com/gpu-driver-takeover"
"""On a node whose driver pod is still the reference operator's: `true` until the upgrade
walk hands the node to our driver DaemonSet."""

FENCED_REVISIONS_ANNOTATION: Final = "nvidia.com/gpu-driver-takeover.revisions"
"""On a fenced reference driver DaemonSet: the `controller-revision-hash` of each pod it had
when fenced, comma-separated."""
_REVISION_LABEL = "controller-revision-hash"

DRIVER_TEMPLATE_LABELS: Final = (
    ("app", "nvidia-driver-daemonset"),
    ("app.kubernetes.io/component", "nvidia-driver"),
)
"""Pod template labels of the reference's driver DaemonSets (ClusterPolicy: the `app`;
NVIDIADriver and precompiled ones share the component)."""

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_FENCE: Final = {"key": DRIVER_TAKEOVER_LABEL, "operator": "Exists"}
KEEP_OFF_TAKEN_OVER: Final = {"key": DRIVER_TAKEOVER_LABEL, "operator": "DoesNotExist"}
"""The node affinity expression every driver DaemonSet of ours carries."""


def owned_by_uid(obj: Mapping[str, Any], uid: str) -> bool:
    return bool(uid) and any(str(ref.get("uid") or "") == uid for ref in owner_references_of(obj))


def is_foreign(obj: Mapping[str, Any], policy_uid: str) -> bool:
    """Owned by the ClusterPolicy with `policy_uid`, and not rendered by us (no component
    label): something the reference operator created for that policy."""
    return owned_by_uid(obj, policy_uid) and COMPONENT_LABEL not in labels_of(obj)


def is_driver_template(daemonset: Mapping[str, Any]) -> bool:
    """Whether a DaemonSet's pods are driver pods (by the reference's labels)."""
    template = (daemonset.get("spec") or {}).get("template") or {}
    labels = labels_of(template)
    return any(labels.get(k) == v for k, v in DRIVER_TEMPLATE_LABELS)


def _terms(pod_spec: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(_REQUIRED) or {}
    return required.get("nodeSelectorTerms") or ()


def is_fenced(daemonset: Mapping[str, Any]) -> bool:
    """Whether the DaemonSet only keeps nodes that carry `DRIVER_TAKEOVER_LABEL` (every
    node selector term requires it): the reference's driver DaemonSet, taken over."""
    terms = _terms(template_pod_spec(daemonset))
    return bool(terms) and all(_FENCE in (t.get("matchExpressions") or ()) for t in terms)


def fence_patch(
    daemonset: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The merge patch that fences a reference driver DaemonSet whose pods are `pods` (None:
    fenced already).

    One write sets `OnDelete` and the affinity together, so the template change restarts
    no pod; the label is ANDed into each existing node selector term (terms are ORed). The
    pods' revisions go with it (`FENCED_REVISIONS_ANNOTATION`)."""
    if is_fenced(daemonset):
        return None
    pod_spec = template_pod_spec(daemonset)
    terms = [
        {**t, "matchExpressions": [*(t.get("matchExpressions") or ()), _FENCE]}
        for t in _terms(pod_spec)
    ] or [{"matchExpressions": [_FENCE]}]
    revisions = sorted({str(labels_of(p).get(_REVISION_LABEL) or "") for p in pods} - {""})
    return {
        "metadata": {"annotations": {FENCED_REVISIONS_ANNOTATION: ",".join(revisions)}},
        "spec": {
            "updateStrategy": {"type": "OnDelete", "rollingUpdate": None},
            "template": {
                "spec": {"affinity": {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": terms}}}}
            },
        },
    }


def revisions_before_fence(daemonset: Mapping[str, Any]) -> frozenset[str] | None:
    """The revisions a fenced DaemonSet's pods ran when it was fenced (None: not recorded,
    fenced by an older operator): a pod at another revision was created since."""
    value = annotations_of(daemonset).get(FENCED_REVISIONS_ANNOTATION)
    if value is None:
        return None
    return frozenset(r for r in str(value).split(",") if r)
