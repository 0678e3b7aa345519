"""Our CRDs on a real kube-apiserver: the reference's samples go in unchanged and come back
whole, bad resources are refused naming the field, and `validate` agrees offline."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from components.api import (
    ApiModel,
    ClusterPolicy,
    ClusterPolicyStatus,
    ComponentStatus,
    GPUCluster,
    GPUClusterStatus,
    NVIDIADriver,
    Reason,
)
from components.offline import (
    CLUSTER_POLICY,
    GPU_CLUSTER,
    KINDS,
    NVIDIA_DRIVER,
    Kind,
    crd,
    validate_document,
)
from tests.unit.components.api.cases import (
    COMPAT_FILES,
    INVALID,
    REFERENCE_CRDS,
    SAMPLE_FILES,
    VALID,
    Invalid,
    Valid,
    load_all,
    policy,
)

pytestmark = pytest.mark.integration

MODELS: dict[str, type[ApiModel]] = {
    CLUSTER_POLICY.kind: ClusterPolicy,
    NVIDIA_DRIVER.kind: NVIDIADriver,
    GPU_CLUSTER.kind: GPUCluster,
}

_installed: set[str] = set()
MERGE_PATCH = {"_content_type": "application/merge-patch+json"}


def kind_of(document: dict[str, Any]) -> Kind:
    return next(k for k in KINDS if k.kind == document["kind"])


async def install_crds(api: client.ApiClient) -> None:
    """Create (or replace) our CRDs and wait until the API serves them."""
    if _installed == {k.crd_name for k in KINDS}:
        return
    extensions = client.ApiextensionsV1Api(api)
    for kind in KINDS:
        body = crd(kind)
        try:
            await extensions.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            live = await extensions.read_custom_resource_definition(kind.crd_name)
            body["metadata"]["resourceVersion"] = live.metadata.resource_version
            await extensions.replace_custom_resource_definition(kind.crd_name, body)
    custom = client.CustomObjectsApi(api)
    for kind in KINDS:
        for _ in range(100):
            live = await extensions.read_custom_resource_definition(kind.crd_name)
            conditions = {c.type: c.status for c in (live.status.conditions or [])}
            if conditions.get("Established") == "True":
                try:
                    await custom.list_cluster_custom_object("nvidia.com", kind.version, kind.plural)
                    break
                except ApiException as exc:
                    if exc.status not in (404, 429, 503):  # not served yet
                        raise
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"{kind.crd_name} never became established: {conditions}")
        _installed.add(kind.crd_name)


@pytest.fixture
async def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    await install_crds(api_client)
    return client.CustomObjectsApi(api_client)


async def create(
    custom: client.CustomObjectsApi, document: dict[str, Any], *, strict: bool = True
) -> dict[str, Any]:
    kind = kind_of(document)
    kwargs = {"field_validation": "Strict"} if strict else {}
    created: dict[str, Any] = await custom.create_cluster_custom_object(
        "nvidia.com", kind.version, kind.plural, copy.deepcopy(document), **kwargs
    )
    return created


async def delete(custom: client.CustomObjectsApi, document: dict[str, Any]) -> None:
    kind = kind_of(document)
    try:
        await custom.delete_cluster_custom_object(
            "nvidia.com", kind.version, kind.plural, document["metadata"]["name"]
        )
    except ApiException as exc:
        if exc.status != 404:
            raise


def lost(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Paths of what was sent but is not in the stored object (defaults may be added)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path or "."]
        out: list[str] = []
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            if key not in stored:
                out.append(where)
            else:
                out.extend(lost(value, stored[key], where))
        return out
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [p for i, item in enumerate(sent) for p in lost(item, stored[i], f"{path}[{i}]")]
    return [] if sent == stored else [path]


def reason(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body)
    except (TypeError, ValueError):
        return str(exc.body)
    return str(body.get("message", body))


async def test_crds_are_established(custom: client.CustomObjectsApi) -> None:
    for kind in KINDS:
        listed = await custom.list_cluster_custom_object("nvidia.com", kind.version, kind.plural)
        assert listed["kind"] == f"{kind.kind}List"


@pytest.mark.parametrize("path", COMPAT_FILES + SAMPLE_FILES, ids=lambda p: Path(p).name)
async def test_samples_are_accepted_unchanged_and_read_back_whole(
    custom: client.CustomObjectsApi, path: Path
) -> None:
    for document in load_all(path):
        assert validate_document(document) == []
        await delete(custom, document)
        try:
            created = await create(custom, document)  # Strict: an unknown field would fail
            kind = kind_of(document)
            stored = await custom.get_cluster_custom_object(
                "nvidia.com", kind.version, kind.plural, document["metadata"]["name"]
            )
            assert lost(document["spec"], stored["spec"]) == []
            assert stored["spec"] == created["spec"]
            model = MODELS[kind.kind]
            parsed = model.from_dict(stored)
            assert lost(document["spec"], parsed.to_dict()["spec"]) == []
        finally:
            await delete(custom, document)


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
async def test_valid_resources_are_accepted_as_validate_says(
    custom: client.CustomObjectsApi, case: Valid
) -> None:
    assert validate_document(case.document) == []
    await delete(custom, case.document)
    try:
        created = await create(custom, case.document)
        assert lost(case.document["spec"], created["spec"]) == []
    finally:
        await delete(custom, case.document)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.id)
async def test_invalid_resources_are_rejected_naming_the_field(
    custom: client.CustomObjectsApi, case: Invalid
) -> None:
    offline = validate_document(case.document)
    assert [p.path for p in offline] == [case.path]
    await delete(custom, case.document)
    try:
        with pytest.raises(ApiException) as raised:
            await create(custom, case.document, strict=case.strict_only)
    finally:
        await delete(custom, case.document)
    assert raised.value.status in (400, 422), reason(raised.value)
    assert case.path in reason(raised.value), reason(raised.value)
    if case.strict_only:
        # Without strict field validation the API server drops the unknown field (and says
        # so in a warning): accepted, but the field is lost. `validate` reports it.
        try:
            created = await create(custom, case.document, strict=False)
            assert lost(case.document["spec"], created["spec"]) == [case.path.removeprefix("spec.")]
        finally:
            await delete(custom, case.document)


async def test_default_nvidiadriver_cannot_gain_a_node_selector(
    custom: client.CustomObjectsApi,
) -> None:
    document = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": "fallback"},
        "spec": {"default": True},
    }
    await delete(custom, document)
    try:
        await create(custom, document)
        with pytest.raises(ApiException) as raised:
            await custom.patch_cluster_custom_object(
                "nvidia.com", "v1alpha1", "nvidiadrivers", "fallback",
                {"spec": {"nodeSelector": {"pool": "a100"}}}, **MERGE_PATCH,
            )  # fmt: skip
        assert "spec.nodeSelector" in reason(raised.value)
        assert "must not use nodeSelector" in reason(raised.value)
    finally:
        await delete(custom, document)


async def test_driver_type_is_immutable(custom: client.CustomObjectsApi) -> None:
    document = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "NVIDIADriver",
        "metadata": {"name": "pool"},
        "spec": {"nodeSelector": {"pool": "a"}},
    }
    await delete(custom, document)
    try:
        created = await create(custom, document)
        assert created["spec"]["driverType"] == "gpu"  # the CRD's default
        with pytest.raises(ApiException) as raised:
            await custom.patch_cluster_custom_object(
                "nvidia.com",
                "v1alpha1",
                "nvidiadrivers",
                "pool",
                {"spec": {"driverType": "vgpu"}},
                **MERGE_PATCH,
            )
        assert "spec.driverType" in reason(raised.value)
        assert "immutable" in reason(raised.value)
    finally:
        await delete(custom, document)


async def test_crd_defaults_match_the_models(custom: client.CustomObjectsApi) -> None:
    document = policy({"driver": {"upgradePolicy": {}}, "cdi": {}, "operator": {}})
    await delete(custom, document)
    try:
        created = await create(custom, document)
        spec = created["spec"]
        assert spec["driver"]["upgradePolicy"] == {
            "autoUpgrade": False,
            "maxParallelUpgrades": 1,
            "maxUnavailable": "25%",
        }
        assert spec["cdi"] == {"enabled": True, "default": False, "nriPluginEnabled": False}
        assert spec["operator"] == {"runtimeClass": "nvidia"}
        # The model reads the same values whether or not the server filled them in.
        served = ClusterPolicy.from_dict(created).spec
        local = ClusterPolicy.from_dict(document).spec
        assert served.to_dict(defaults=True) == local.to_dict(defaults=True)
    finally:
        await delete(custom, document)


async def test_status_subresource_takes_our_status(custom: client.CustomObjectsApi) -> None:
    document = policy({}, name="with-status")
    await delete(custom, document)
    try:
        await create(custom, document)
        status = ClusterPolicyStatus(state="notReady", namespace="gpu-operator")
        status.components = [
            ComponentStatus.build("state-driver", "notReady", nodes_desired=3, nodes_ready=2,
                                  not_ready_nodes=["gpu-node-2"]),
        ]  # fmt: skip
        status.mark_not_ready(Reason.DRIVER_NOT_READY, "driver not ready on gpu-node-2")
        body = status.to_dict(defaults=True)
        written = await custom.patch_cluster_custom_object_status(
            "nvidia.com", "v1", "clusterpolicies", "with-status", {"status": body}, **MERGE_PATCH
        )
        assert written["status"] == body
        parsed = ClusterPolicy.from_dict(written)
        assert parsed.status is not None and parsed.status.state == "notReady"
        with pytest.raises(ApiException) as raised:
            await custom.patch_cluster_custom_object_status(
                "nvidia.com", "v1", "clusterpolicies", "with-status",
                {"status": {"state": "sideways"}}, **MERGE_PATCH,
            )  # fmt: skip
        assert "status.state" in reason(raised.value)
    finally:
        await delete(custom, document)


async def test_printer_columns(
    api_client: client.ApiClient, custom: client.CustomObjectsApi
) -> None:
    document = policy({}, name="columns")
    await delete(custom, document)
    try:
        await create(custom, document)
        response = await api_client.call_api(
            "/apis/nvidia.com/v1/clusterpolicies",
            "GET",
            header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        columns = [c["name"] for c in response["columnDefinitions"]]
        assert columns[:1] == ["Name"]
        assert "Status" in columns and "Age" in columns
    finally:
        await delete(custom, document)


def test_kinds_cover_all_three() -> None:
    assert {k.kind for k in KINDS} == {CLUSTER_POLICY.kind, NVIDIA_DRIVER.kind, GPU_CLUSTER.kind}


COUNTS = [0, 1, 7, -1, "0%", "5%", "25%", "100%", "101%", "007%", "5", "07", "abc", "", "25 %",
          "%", "1.5%", "-5%"]  # fmt: skip


@pytest.mark.parametrize("value", COUNTS, ids=repr)
async def test_int_or_percent_rules_agree_with_their_python_twins(
    custom: client.CustomObjectsApi, value: int | str
) -> None:
    """The CEL rules (RE2, on the server) and their Python checks give the same verdicts."""
    document = policy(
        {
            "driver": {"upgradePolicy": {"maxUnavailable": value}},
            # A string field (as the reference's): an integer is written as its digits.
            "daemonsets": {"rollingUpdate": {"maxUnavailable": str(value)}},
        },
        name="int-or-percent",
    )
    offline = {p.path for p in validate_document(document)}
    await delete(custom, document)
    try:
        await create(custom, document)
        online: set[str] = set()
    except ApiException as exc:
        message = reason(exc)
        online = {
            path
            for path in (
                "spec.driver.upgradePolicy.maxUnavailable",
                "spec.daemonsets.rollingUpdate.maxUnavailable",
            )
            if path in message
        }
        assert online, message
    finally:
        await delete(custom, document)
    assert online == offline


# --- round trip of what a migrating admin already has ---------------------------------

HELM_RENDERED = (
    Path(__file__).resolve().parents[2] / "fixtures" / "helm-rendered-clusterpolicy.yaml"
)
APPLY = {"_content_type": "application/apply-patch+yaml", "field_manager": "admin", "force": True}


def with_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """`value` with the defaults of `schema` filled in, as a structural CRD's API server does
    (absent fields only; an explicit null stays null)."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for name, child in schema["properties"].items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if out.get(name) is not None:
                out[name] = with_defaults(out[name], child)
        return out
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: with_defaults(v, schema["additionalProperties"]) for k, v in value.items()}
    if isinstance(value, list) and "items" in schema:
        return [with_defaults(item, schema["items"]) for item in value]
    return value


def reference_spec_schema(kind: Kind) -> dict[str, Any]:
    (document,) = load_all(REFERENCE_CRDS[kind.kind])
    schema: dict[str, Any] = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return dict(schema["properties"]["spec"])


@pytest.mark.parametrize("path", [*COMPAT_FILES, HELM_RENDERED], ids=lambda p: Path(p).name)
async def test_what_the_reference_accepts_round_trips_unchanged_through_server_side_apply(
    custom: client.CustomObjectsApi, path: Path
) -> None:
    """The reference's samples and a policy as its Helm chart renders it (every section
    filled): applied server-side, read back, the spec is what was sent plus exactly the
    defaults the reference's own CRD would add; applying it again changes nothing."""
    (document,) = load_all(path)
    kind = kind_of(document)
    name = document["metadata"]["name"]
    await delete(custom, document)
    try:
        await custom.patch_cluster_custom_object(
            "nvidia.com", kind.version, kind.plural, name, copy.deepcopy(document), **APPLY
        )
        stored = await custom.get_cluster_custom_object(
            "nvidia.com", kind.version, kind.plural, name
        )
        expected = with_defaults(document["spec"], reference_spec_schema(kind))
        assert stored["spec"] == expected
        await custom.patch_cluster_custom_object(
            "nvidia.com", kind.version, kind.plural, name, copy.deepcopy(document), **APPLY
        )
        again = await custom.get_cluster_custom_object(
            "nvidia.com", kind.version, kind.plural, name
        )
        assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        model = MODELS[kind.kind]
        assert model.from_dict(stored).to_dict()["spec"] == stored["spec"]
    finally:
        await delete(custom, document)


def gpu_cluster(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": GPU_CLUSTER.api_version,
        "kind": GPU_CLUSTER.kind,
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (
            gpu_cluster("second", {"draDriver": {}}),
            "only one GPUCluster per cluster: its metadata.name must be gpu-cluster",
        ),
        (gpu_cluster("gpu-cluster", {}), "spec.draDriver: Required value"),
        (
            gpu_cluster("gpu-cluster", {"draDriver": {"image": "registry/dra"}}),
            "spec.draDriver.image",
        ),
    ],
    ids=["not-named-gpu-cluster", "no-dra-driver", "image-with-a-slash"],
)
async def test_the_api_server_refuses_the_gpuclusters_validate_refuses(
    custom: client.CustomObjectsApi, document: dict[str, Any], says: str
) -> None:
    """The singleton name, the required driver section and the image pattern hold on the
    server as they do offline (one verdict)."""
    assert validate_document(document) != []
    await delete(custom, document)
    try:
        with pytest.raises(ApiException) as raised:
            await create(custom, document)
        assert raised.value.status == 422
        assert says in reason(raised.value)
    finally:
        await delete(custom, document)


async def test_kubectl_get_gpuclusters_shows_status_and_age(
    custom: client.CustomObjectsApi,
) -> None:
    document = gpu_cluster("gpu-cluster", {"draDriver": {}})
    await delete(custom, document)
    try:
        await create(custom, document)
        response = await custom.api_client.call_api(
            "/apis/nvidia.com/v1alpha1/gpuclusters",
            "GET",
            header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
            response_types_map={200: "object"},
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
        )
        assert [c["name"] for c in response["columnDefinitions"]] == ["Name", "Status", "Age"]
        assert [row["cells"][0] for row in response["rows"]] == ["gpu-cluster"]
    finally:
        await delete(custom, document)


async def test_gpucluster_status_takes_state_namespace_and_conditions(
    custom: client.CustomObjectsApi,
) -> None:
    """The status a controller will write: the reference's three states, and no other."""
    document = gpu_cluster("gpu-cluster", {"draDriver": {}})
    await delete(custom, document)
    try:
        await create(custom, document)
        status = GPUClusterStatus(state="disabled", namespace="gpu-operator")
        status.mark_not_ready("NotReconciled", "no controller for GPUCluster yet")
        body = status.to_dict(defaults=True)
        written = await custom.patch_cluster_custom_object_status(
            "nvidia.com", "v1alpha1", "gpuclusters", "gpu-cluster", {"status": body},
            **MERGE_PATCH,
        )  # fmt: skip
        assert written["status"] == body
        parsed = GPUCluster.from_dict(written)
        assert parsed.status is not None and parsed.status.state == "disabled"
        assert [c.type for c in parsed.status.conditions] == ["Ready", "Error"]
        with pytest.raises(ApiException) as raised:
            await custom.patch_cluster_custom_object_status(
                "nvidia.com", "v1alpha1", "gpuclusters", "gpu-cluster",
                {"status": {"state": "ignored"}}, **MERGE_PATCH,
            )  # fmt: skip
        assert "status.state" in reason(raised.value)
    finally:
        await delete(custom, document)
