"""Both install paths against a real API server: what `kubectl apply -k config/default` and
`helm install` would send is accepted whole. Namespaces and CRDs are applied for real (the
rest needs them to exist); everything else is a server-side dry run, so the checks run on
the shared control plane without leaving an operator behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler import GVK, Cache, Client, Object, name_of, namespace_of
from reconciler.lowlevel import RESTMapper, Transport
from tests.polling import eventually
from tests.tools import CHART, REPO, run
from tests.unit.components.api.cases import COMPAT

pytestmark = pytest.mark.integration

APPLY_PATCH = "application/apply-patch+yaml"
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
REAL = {"Namespace", "CustomResourceDefinition"}


@pytest.fixture
async def client(api_client: Any) -> AsyncIterator[Client]:
    transport = Transport(api_client)
    mapper = RESTMapper(transport)
    cache = Cache(transport, mapper)
    yield Client(transport, mapper, cache, field_manager="install-check")
    await cache.stop()


async def established(client: Client, name: str) -> bool:
    crd = await client.get_live(CRD, name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


async def apply_all(client: Client, documents: list[Object]) -> list[Object]:
    """Apply in kubectl's order: Namespaces and CRDs for real, the rest as a dry run."""
    answers = []
    first = [d for d in documents if d["kind"] in REAL]
    for doc in sorted(first, key=lambda d: d["kind"] != "Namespace"):
        answers.append((await client.apply(doc)).object)
        if doc["kind"] == "CustomResourceDefinition":
            await eventually(lambda d=doc: established(client, name_of(d)), name_of(doc))
    for doc in documents:
        if doc["kind"] in REAL:
            continue
        resource = await client.resource(GVK.of(doc))
        answers.append(
            await client.request(
                "PATCH",
                resource.path(namespace_of(doc), name_of(doc)),
                params={"fieldManager": "install-check", "force": True, "dryRun": "All"},
                body=doc,
                content_type=APPLY_PATCH,
            )
        )
    return answers


def kustomize(directory: Path) -> list[Object]:
    return [d for d in yaml.safe_load_all(run("kustomize", "build", directory).stdout) if d]


def helm_template(namespace: str, *args: str | Path) -> list[Object]:
    out = run("helm", "template", "gpu", CHART, "--namespace", namespace, "--include-crds", *args)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


async def test_kustomize_default_applies_in_one_step(client: Client) -> None:
    documents = kustomize(REPO / "config" / "default")
    kinds = {d["kind"] for d in documents}
    assert {"Namespace", "CustomResourceDefinition", "ClusterRole", "Deployment"} <= kinds
    answers = await apply_all(client, documents)
    assert len(answers) == len(documents)
    deployment = next(a for a in answers if a["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "gpu-operator"


async def test_kustomize_namespace_is_set_in_one_place(client: Client, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (tmp_path / "config").symlink_to(REPO / "config")
    (overlay / "kustomization.yaml").write_text(
        "namespace: install-check\nresources: [../config/default]\n"
    )
    documents = kustomize(overlay)
    namespaced = [d for d in documents if "namespace" in d["metadata"]]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"install-check"}
    subjects = [s for d in documents for s in d.get("subjects", [])]
    assert subjects and {s["namespace"] for s in subjects} == {"install-check"}
    assert next(d for d in documents if d["kind"] == "Namespace")["metadata"]["name"] == (
        "install-check"
    )
    await apply_all(client, documents)


@pytest.mark.parametrize("values", ["defaults", "reference"])
async def test_helm_chart_renders_what_the_api_server_accepts(client: Client, values: str) -> None:
    namespace = "helm-check"
    args = [] if values == "defaults" else ["--values", COMPAT / "reference-helm-values.yaml"]
    documents = helm_template(namespace, *args)
    await client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    answers = await apply_all(client, documents)
    policy = next(a for a in answers if a["kind"] == "ClusterPolicy")
    assert policy["spec"]["driver"]["version"] == "595.91.07"
    assert {a["kind"] for a in answers} >= {"Job", "Deployment", "ClusterPolicy", "Service"}


async def test_helm_chart_with_gpucluster_renders_what_the_api_server_accepts(
    client: Client,
) -> None:
    """gpuCluster.deployCR=true (the ClusterPolicy off, as it must be): the GPUCluster the
    chart renders from NVIDIA's values file is stored, and no ClusterPolicy comes with it."""
    namespace = "helm-dra-check"
    documents = helm_template(
        namespace,
        "--values", COMPAT / "reference-helm-values.yaml",
        "--set", "gpuCluster.deployCR=true", "--set", "clusterPolicy.deployCR=false",
    )  # fmt: skip
    await client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    answers = await apply_all(client, documents)
    cluster = next(a for a in answers if a["kind"] == "GPUCluster")
    assert cluster["metadata"]["name"] == "gpu-cluster"
    assert cluster["spec"]["draDriver"]["image"] == "dra-driver-nvidia-gpu"
    assert "ClusterPolicy" not in {a["kind"] for a in answers}
