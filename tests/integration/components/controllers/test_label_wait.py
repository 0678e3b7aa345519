"""A fresh policy's DaemonSets come after the node labels they select on: on a real API
server, with a ValidatingAdmissionPolicy refusing one node its labels."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import pytest

from components.controllers import _label_wait as label_wait_module
from reconciler import GVK
from reconciler.errors import ApiError
from tests.integration.components.controllers.conftest import Cluster
from tests.polling import eventually

pytestmark = pytest.mark.integration

DRIVER_LABEL = "nvidia.com/gpu.deploy.driver"
PROBE_LABEL = "probe.gpu-operator.test/refused"
VAP = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy")
VAP_BINDING = GVK("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding")


@contextlib.asynccontextmanager
async def labels_refused(cluster: Cluster, node: str) -> AsyncIterator[None]:
    """While open, the API server refuses `node` its driver deploy label (as a webhook or
    an admission policy of the cluster's might)."""
    name = cluster.name("refuse-labels")
    labels = "object.metadata.labels"
    expression = (
        f"object.metadata.name != '{node}' || !has(object.metadata.labels) || "
        f"!('{DRIVER_LABEL}' in {labels} || '{PROBE_LABEL}' in {labels})"
    )
    await cluster.client.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["nodes"],
                        }
                    ]
                },
                "validations": [{"expression": expression, "message": "labels refused"}],
            },
        }
    )
    await cluster.client.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]},
        }
    )
    try:

        async def refusing() -> bool:
            # The API server takes a moment to load a new policy: probe with a label of our
            # own until it is refused (and take it off again when it was not).
            try:
                await cluster.label_node(node, {PROBE_LABEL: "x"})
            except ApiError:
                return True
            await cluster.label_node(node, {PROBE_LABEL: None})
            return False

        await eventually(refusing, "the admission policy to refuse the node's labels")
        yield
    finally:
        await cluster.client.delete(VAP_BINDING, name, missing_ok=True)
        await cluster.client.delete(VAP, name, missing_ok=True)


async def test_daemonsets_wait_for_the_last_node_labels(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(label_wait_module, "LABEL_WAIT_SECONDS", 3600.0)
    labelled = await cluster.add_node("gpu-a")
    refused = await cluster.add_node("gpu-b")
    async with labels_refused(cluster, refused):
        policy = (await cluster.create_policy("policy"))["metadata"]["name"]

        async def prerequisites() -> bool:
            ours = await cluster.node_labels(labelled)
            account = await cluster.get(
                GVK("", "v1", "ServiceAccount"), "nvidia-driver", cluster.namespace
            )
            return ours.get(DRIVER_LABEL) == "true" and account is not None

        await eventually(prerequisites, "one node labelled and the prerequisites written")
        status = await eventually(lambda: cluster.status(policy), "the policy's status")
        assert status.get("state") != "ready"
        # (The controllers never go idle here: the refused node's label write is retried.)
        assert await cluster.daemonsets() == {}, "no DaemonSet while a node lacks its labels"

    # The label controller retries the refused node; a change of its labels sends it there
    # at once (instead of after its backoff).
    await cluster.label_node(refused, {"example.com/touched": "yes"})
    await eventually(
        lambda: _has_label(cluster, refused, DRIVER_LABEL), "the refused node to get its labels"
    )
    await eventually(lambda: _driver_daemonset(cluster), "the driver DaemonSet once labelled")


async def test_a_node_that_cannot_be_labelled_holds_the_daemonsets_back_only_for_a_while(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(label_wait_module, "LABEL_WAIT_SECONDS", 2.0)
    labelled = await cluster.add_node("gpu-a")
    refused = await cluster.add_node("gpu-b")
    async with labels_refused(cluster, refused):
        with caplog.at_level(logging.WARNING, logger="components.controllers.clusterpolicy"):
            await cluster.create_policy("policy")
            await eventually(
                lambda: _driver_daemonset(cluster), "the driver DaemonSet after the wait"
            )
        assert DRIVER_LABEL not in await cluster.node_labels(refused)
        assert (await cluster.node_labels(labelled)).get(DRIVER_LABEL) == "true"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("still lack their labels" in w and refused in w for w in warnings), warnings


async def _driver_daemonset(cluster: Cluster) -> bool:
    """Whether the driver DaemonSet exists. The DaemonSets are created at once, so the first
    one seen need not be the driver's (asking for any one raced their creation)."""
    return "nvidia-driver-daemonset" in await cluster.daemonsets()


async def _has_label(cluster: Cluster, node: str, key: str) -> bool:
    return key in await cluster.node_labels(node)
