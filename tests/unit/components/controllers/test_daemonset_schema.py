"""The DaemonSets informer's schema caches what decoding whole and trimming would."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.controllers._cached_shapes import DaemonSetAsRead
from components.operands import Driver
from components.operands.readiness import daemonset_pods_ready
from reconciler._decode import ObjectDecoder
from reconciler.lowlevel import Trimmer
from tests.unit.components.operands.cases import CLUSTER, daemonsets, policy, view

pytestmark = pytest.mark.unit


def _as_sent() -> dict[str, Any]:
    """The driver's DaemonSet as the API server sends it after a rollout's first counts."""
    rendered = daemonsets(Driver().render(policy(None), view(CLUSTER)))
    ds = copy.deepcopy(next(iter(rendered.values())))
    ds["metadata"].update(
        uid="4c1d",
        resourceVersion="5120",
        generation=2,
        creationTimestamp="2026-12-05T10:00:00Z",
        ownerReferences=[{"kind": "ClusterPolicy", "name": "cluster-policy", "uid": "9f"}],
        managedFields=[
            {"manager": "gpu-operator", "operation": "Apply", "fieldsV1": {"f:spec": {}}},
            {"manager": "kube-controller-manager", "subresource": "status"},
        ],
    )
    ds["metadata"].setdefault("annotations", {})[
        "kubectl.kubernetes.io/last-applied-configuration"
    ] = "{}"
    ds["status"] = {
        "observedGeneration": 2,
        "desiredNumberScheduled": 1000,
        "currentNumberScheduled": 1000,
        "updatedNumberScheduled": 640,
        "numberReady": 512,
        "numberUnavailable": 488,
    }
    return ds


def _cached(ds: dict[str, Any], schema: Any) -> dict[str, Any]:
    trimmer = Trimmer(schema=schema)
    decoder = ObjectDecoder(trimmer.decoder_paths, schema)
    event = json.dumps({"type": "MODIFIED", "object": ds}, separators=(",", ":")).encode()
    return trimmer(decoder.event(event)[1])


def test_the_schema_caches_what_decoding_whole_and_trimming_caches() -> None:
    ds = _as_sent()
    assert _cached(ds, DaemonSetAsRead) == _cached(ds, None)


def test_what_readiness_and_the_upgrade_read_of_a_daemonset_survives() -> None:
    ds = _as_sent()
    cached = _cached(ds, DaemonSetAsRead)
    assert "managedFields" not in cached["metadata"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in cached["metadata"].get(
        "annotations", {}
    )
    assert cached["status"] == ds["status"]
    assert cached["spec"] == ds["spec"]  # template, selector, update strategy: whole
    assert cached["metadata"]["ownerReferences"] == ds["metadata"]["ownerReferences"]
    assert cached["metadata"]["generation"] == 2
    assert daemonset_pods_ready(cached, None, ()) == daemonset_pods_ready(ds, None, ())
