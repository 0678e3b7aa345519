"""Which objects are the reference operator's, and the fence that hands its driver
DaemonSet's nodes to ours one at a time."""

from __future__ import annotations

from typing import Any

from components.api import (
    COMPONENT_LABEL,
    DRIVER_TAKEOVER_LABEL,
    FENCED_REVISIONS_ANNOTATION,
    fence_patch,
    is_driver_template,
    is_fenced,
    is_foreign,
    pod_spec_targets,
    revisions_before_fence,
    template_pod_spec,
)

UID = "policy-uid"
OWNER = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": "p", "uid": UID}


def ds(labels: dict[str, str] | None = None, **pod_spec: Any) -> dict[str, Any]:
    return {
        "kind": "DaemonSet",
        "metadata": {
            "name": "nvidia-driver-daemonset",
            "ownerReferences": [OWNER],
            "labels": labels or {},
        },
        "spec": {
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "nvidia-driver-daemonset"}},
                "spec": {"nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"}, **pod_spec},
            },
        },
    }


def merged(obj: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386, enough for the fence patch."""
    out = dict(obj)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merged(out[k], v)
        else:
            out[k] = v
    return out


def test_foreign_means_owned_by_the_policy_and_not_labelled_as_ours() -> None:
    assert is_foreign(ds(), UID)
    assert not is_foreign(ds({COMPONENT_LABEL: "state-driver"}), UID)
    assert not is_foreign(ds(), "another-uid")
    assert is_driver_template(ds())


def pod(revision: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"controller-revision-hash": revision}}}


def test_the_fence_keeps_only_labelled_nodes_and_restarts_nothing() -> None:
    original = ds()
    assert revisions_before_fence(original) is None
    patch = fence_patch(original, [pod("b"), pod("a"), pod("b"), {"metadata": {}}])
    assert patch is not None
    fenced = merged(original, patch)
    assert fenced["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert is_fenced(fenced) and fence_patch(fenced, []) is None
    # The revisions its pods ran then: a pod at another one was created after the fence.
    assert fenced["metadata"]["annotations"] == {FENCED_REVISIONS_ANNOTATION: "a,b"}
    assert revisions_before_fence(fenced) == {"a", "b"}
    spec = template_pod_spec(fenced)
    gpu = {"nvidia.com/gpu.deploy.driver": "true"}
    assert pod_spec_targets(spec, {**gpu, DRIVER_TAKEOVER_LABEL: "true"})
    assert not pod_spec_targets(spec, gpu)


def test_the_fence_is_anded_into_every_existing_term() -> None:
    terms = [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
    ]
    original = ds(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    )
    fenced = merged(original, fence_patch(original, []) or {})
    spec = template_pod_spec(fenced)
    assert pod_spec_targets(
        spec, {"nvidia.com/gpu.deploy.driver": "true", "b": "", DRIVER_TAKEOVER_LABEL: "true"}
    )
    assert not pod_spec_targets(spec, {"nvidia.com/gpu.deploy.driver": "true", "b": ""})
