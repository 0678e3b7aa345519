"""Writes against the real API server: apply, patches, deletes, evictions, events, errors."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from reconciler import GVK, Client, EventRecorder, Eviction, Object, Operation, PatchType
from reconciler.errors import Conflict, Invalid, NotFound
from reconciler.lowlevel import METADATA_ONLY, desired_hash
from tests.polling import eventually

from .conftest import CONFIGMAP, Kit, configmap

pytestmark = pytest.mark.integration

POD = GVK("", "v1", "Pod")
PDB = GVK("policy", "v1", "PodDisruptionBudget")
EVENT = GVK("", "v1", "Event")
HASH = "reconciler.test/applied-hash"


def pod(name: str, namespace: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


async def test_apply_takes_fields_by_force_and_uses_one_field_manager(
    kit: Kit, namespace: str
) -> None:
    out = (await kit.client.apply(configmap("cm", namespace, a="1"))).object
    assert out["data"] == {"a": "1"}
    # Another manager takes the field; our forced apply takes it back, without a conflict.
    other = Client(kit.transport, kit.mapper, kit.cache, field_manager="someone-else")
    await other.apply(configmap("cm", namespace, a="2"))
    with pytest.raises(Conflict, match="conflict"):
        await kit.client.apply(configmap("cm", namespace, a="3"), force=False)
    out = (await kit.client.apply(configmap("cm", namespace, a="3"))).object
    assert out["data"] == {"a": "3"}
    managers = {f["manager"] for f in out["metadata"]["managedFields"]}
    assert "tests" in managers


async def test_apply_is_skipped_when_the_cache_shows_the_same_desired_hash(
    kit: Kit, namespace: str
) -> None:
    client = Client(
        kit.transport, kit.mapper, kit.cache, field_manager="tests", hash_annotation=HASH
    )
    kit.cache.informer(CONFIGMAP, namespace=namespace)
    await kit.cache.start()
    await kit.cache.wait_for_sync(60)
    desired = configmap("cm", namespace, a="1")
    first = await client.apply(desired)
    assert first.operation is Operation.CREATED
    assert first.object["metadata"]["annotations"][HASH] == desired_hash(desired)
    await eventually(
        lambda: kit.cache.get(CONFIGMAP, "cm", namespace) is not None, "the ConfigMap in the cache"
    )
    again = await client.apply(configmap("cm", namespace, a="1"))
    assert again.operation is Operation.UNCHANGED
    assert (
        again.object["metadata"]["resourceVersion"] == first.object["metadata"]["resourceVersion"]
    )
    changed = await client.apply(configmap("cm", namespace, a="2"))
    assert changed.operation is Operation.UPDATED
    assert changed.object["data"] == {"a": "2"}


async def test_a_desired_state_back_to_what_a_lagging_cache_shows_is_applied(
    kit: Kit, namespace: str
) -> None:
    """The desired ConfigMap goes from a=1 to a=2 and back to a=1 before the watch brings
    our a=2 write: the cache still shows a=1's hash, but the server holds a=2. The apply
    must go out (it was skipped, and a=2 stayed: nothing corrects a state we wrote)."""
    client = Client(
        kit.transport, kit.mapper, kit.cache, field_manager="tests", hash_annotation=HASH
    )
    informer = kit.cache.informer(CONFIGMAP, namespace=namespace)
    await kit.cache.start()
    await kit.cache.wait_for_sync(60)
    await client.apply(configmap("cm", namespace, a="1"))
    await eventually(
        lambda: (kit.cache.get(CONFIGMAP, "cm", namespace) or {}).get("data") == {"a": "1"},
        "a=1 in the cache",
    )

    held: list[tuple[str, Object]] = []
    deliver = informer.on_watch_event
    informer.on_watch_event = lambda kind, obj: held.append((kind, obj))  # type: ignore[method-assign]
    try:
        assert (await client.apply(configmap("cm", namespace, a="2"))).changed
        back = await client.apply(configmap("cm", namespace, a="1"))
        assert back.operation is Operation.UPDATED
        live = await kit.client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/cm")
        assert live["data"] == {"a": "1"}
    finally:
        informer.on_watch_event = deliver  # type: ignore[method-assign]
        for kind, obj in held:
            deliver(kind, obj)
    # With the cache caught up, the same desired state is skipped again.
    await eventually(
        lambda: (kit.cache.get(CONFIGMAP, "cm", namespace) or {}).get("data") == {"a": "1"},
        "a=1 back in the cache",
    )
    assert (await client.apply(configmap("cm", namespace, a="1"))).operation is (
        Operation.UNCHANGED
    )


async def test_apply_says_what_it_did_without_a_cache(kit: Kit, namespace: str) -> None:
    # No informer for the kind: the object before the apply is read from the server.
    assert not kit.cache.is_cached(CONFIGMAP)
    assert (await kit.client.apply(configmap("cm", namespace, a="1"))).operation is (
        Operation.CREATED
    )
    same = await kit.client.apply(configmap("cm", namespace, a="1"))
    assert same.operation is Operation.UNCHANGED
    assert not same.changed
    other = await kit.client.apply(configmap("cm", namespace, a="2"))
    assert other.operation is Operation.UPDATED


async def test_invalid_object_surfaces_the_servers_message(kit: Kit, namespace: str) -> None:
    bad = configmap("Not_A_Valid_Name", namespace)
    with pytest.raises(Invalid) as info:
        await kit.client.apply(bad)
    assert "Not_A_Valid_Name" in info.value.message
    assert info.value.status == 422


async def test_merge_patch_labels_and_delete_with_propagation(kit: Kit, namespace: str) -> None:
    await kit.client.apply(configmap("cm", namespace))
    out = await kit.client.patch(
        CONFIGMAP,
        "cm",
        {"metadata": {"labels": {"nvidia.com/gpu.present": "true"}}},
        namespace=namespace,
    )
    assert out["metadata"]["labels"] == {"nvidia.com/gpu.present": "true"}
    # Foreground: the object waits for its dependents, marked by a finalizer (no garbage
    # collector runs here to remove it), which shows the policy reached the server.
    await kit.client.delete(CONFIGMAP, "cm", namespace=namespace, propagation_policy="Foreground")
    live = await kit.client.get_live(CONFIGMAP, "cm", namespace)
    assert live["metadata"]["deletionTimestamp"]
    assert live["metadata"]["finalizers"] == ["foregroundDeletion"]
    await kit.client.patch(CONFIGMAP, "cm", {"metadata": {"finalizers": None}}, namespace=namespace)
    with pytest.raises(NotFound, match="not found"):
        await kit.client.get_live(CONFIGMAP, "cm", namespace)
    with pytest.raises(NotFound):
        await kit.client.delete(CONFIGMAP, "cm", namespace=namespace)
    await kit.client.delete(CONFIGMAP, "cm", namespace=namespace, missing_ok=True)


async def test_patch_without_its_whole_answer_returns_the_written_identity(
    kit: Kit, namespace: str
) -> None:
    """A caller that does not read the answer gets what names the write (the version it
    made), not the object, and asks the API server for no more than the metadata: a node
    label write so neither gets nor decodes a node's images and status."""
    await kit.client.apply(configmap("identity", namespace, a="1"))
    asked: list[str] = []
    request = kit.transport.request

    async def recording(*args: Any, **kwargs: Any) -> Object:
        asked.append(kwargs.get("accept", ""))
        return await request(*args, **kwargs)

    kit.transport.request = recording  # type: ignore[method-assign]
    out = await kit.client.patch(
        CONFIGMAP,
        "identity",
        {"metadata": {"labels": {"x": "1"}}, "data": {"b": "2"}},
        namespace=namespace,
        whole_answer=False,
    )
    kit.transport.request = request  # type: ignore[method-assign]
    live = await kit.client.get_live(CONFIGMAP, "identity", namespace)
    assert live["metadata"]["labels"] == {"x": "1"} and live["data"] == {"a": "1", "b": "2"}
    meta = live["metadata"]
    assert out == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "identity",
            "namespace": namespace,
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
    }
    assert asked == [METADATA_ONLY]


async def test_an_answer_asked_as_metadata_only_carries_no_data(kit: Kit, namespace: str) -> None:
    await kit.client.apply(configmap("meta-only", namespace, big="x" * 20_000))
    path = f"/api/v1/namespaces/{namespace}/configmaps/meta-only"
    out = await kit.transport.request("GET", path, accept=METADATA_ONLY)
    assert out["kind"] == "PartialObjectMetadata"
    assert out["metadata"]["name"] == "meta-only" and "data" not in out


async def test_a_strategic_merge_patch_sets_and_removes_labels_and_keeps_the_rest(
    kit: Kit, namespace: str
) -> None:
    """The node label controller's write: a label set, one removed (null), the others and
    the object's data kept."""
    cm = configmap("smp", namespace, a="1")
    cm["metadata"]["labels"] = {"keep": "k", "gone": "g"}
    await kit.client.apply(cm)
    await kit.client.patch(
        CONFIGMAP,
        "smp",
        {"metadata": {"labels": {"new": "n", "gone": None}}},
        namespace=namespace,
        patch_type=PatchType.STRATEGIC_MERGE,
        whole_answer=False,
    )
    live = await kit.client.get_live(CONFIGMAP, "smp", namespace)
    assert live["metadata"]["labels"] == {"keep": "k", "new": "n"}
    assert live["data"] == {"a": "1"}


class _NameOnly(TypedDict, total=False):
    name: Any


class _ConfigMapAsRead(TypedDict, total=False):
    metadata: _NameOnly
    data: Any


async def test_live_pages_decoded_by_a_schema_hold_what_it_names(kit: Kit, namespace: str) -> None:
    """The pages of a LIST too long for one answer, each object kept as the schema says
    (what the naming of a stalled operand's nodes does with 500 pods a page)."""
    for name in ("a", "b", "c"):
        obj = configmap(name, namespace, key=name)
        obj["metadata"]["labels"] = {"paged": "yes"}
        await kit.client.apply(obj)
    pages = [
        page
        async for page in kit.client.list_live_pages(
            CONFIGMAP,
            namespace=namespace,
            label_selector="paged=yes",
            limit=2,
            schema=_ConfigMapAsRead,
        )
    ]
    assert [len(p) for p in pages] == [2, 1]
    assert [item for page in pages for item in page] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"key": n}}
        for n in ("a", "b", "c")
    ]


async def test_delete_of_a_version_that_changed_since_conflicts(kit: Kit, namespace: str) -> None:
    """What keeps a second reconcile, reading a cache still behind its own first delete,
    from deleting (and logging it) again: the delete names the version it saw."""
    await kit.client.apply(configmap("versioned", namespace))
    seen = await kit.client.get_live(CONFIGMAP, "versioned", namespace)
    version = seen["metadata"]["resourceVersion"]
    await kit.client.patch(
        CONFIGMAP, "versioned", {"metadata": {"labels": {"x": "1"}}}, namespace=namespace
    )
    with pytest.raises(Conflict):
        await kit.client.delete(
            CONFIGMAP, "versioned", namespace=namespace, resource_version=version
        )
    live = await kit.client.get_live(CONFIGMAP, "versioned", namespace)
    await kit.client.delete(
        CONFIGMAP,
        "versioned",
        namespace=namespace,
        uid=live["metadata"]["uid"],
        resource_version=live["metadata"]["resourceVersion"],
    )
    with pytest.raises(NotFound):
        await kit.client.get_live(CONFIGMAP, "versioned", namespace)


async def test_update_status_with_a_stale_resource_version_conflicts(
    kit: Kit, namespace: str
) -> None:
    node_name = f"node-{namespace}"
    node = await kit.client.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name}}
    )
    try:
        await kit.client.patch(
            GVK("", "v1", "Node"), node_name, {"metadata": {"labels": {"x": "1"}}}
        )
        node["status"] = {"conditions": []}
        with pytest.raises(Conflict, match="modified"):
            await kit.client.update_status(node)
    finally:
        await kit.client.delete(GVK("", "v1", "Node"), node_name, missing_ok=True)


async def test_eviction_blocked_by_a_pdb_is_an_outcome_not_an_error(
    kit: Kit, namespace: str
) -> None:
    guarded = await kit.client.create(pod("guarded", namespace, {"app": "guarded"}))
    # Pending pods are evicted regardless of budgets; make this one Running and Ready.
    guarded["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    await kit.client.update_status(guarded)
    await kit.client.create(pod("free", namespace))
    await kit.client.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    blocked = await kit.client.evict("guarded", namespace)
    assert blocked.outcome is Eviction.BLOCKED
    assert not blocked.evicted
    assert blocked.message
    evicted = await kit.client.evict("free", namespace)
    assert evicted.outcome is Eviction.EVICTED
    gone = await kit.client.evict("never-existed", namespace)
    assert gone.outcome is Eviction.NOT_FOUND and gone.evicted


async def test_events_are_recorded_and_repeats_aggregated(kit: Kit, namespace: str) -> None:
    target = (await kit.client.apply(configmap("cm", namespace))).object
    recorder = EventRecorder(kit.client, "reconciler-tests")
    await recorder.event(target, "Normal", "Synced", "all good")
    await recorder.event(target, "Normal", "Synced", "all good")
    await recorder.event(target, "Warning", "Broken", "not good")
    events = await kit.client.list_live(EVENT, namespace=namespace)
    by_reason = {e["reason"]: e for e in events}
    assert by_reason["Synced"]["count"] == 2
    assert by_reason["Synced"]["involvedObject"]["uid"] == target["metadata"]["uid"]
    assert by_reason["Broken"]["type"] == "Warning"
    assert by_reason["Synced"]["source"]["component"] == "reconciler-tests"


async def test_a_flood_of_events_about_one_object_is_cut_to_a_budget(
    kit: Kit, namespace: str
) -> None:
    flooded = (await kit.client.apply(configmap("flooded", namespace))).object
    other = (await kit.client.apply(configmap("other", namespace))).object
    now = [0.0]
    recorder = EventRecorder(
        kit.client, "reconciler-tests", spam_burst=5, spam_refill=60, clock=lambda: now[0]
    )
    for i in range(8):
        await recorder.event(flooded, "Normal", "Step", f"step {i}")
    await recorder.event(flooded, "Warning", "Failed", "another reason has its own budget")
    await recorder.event(other, "Normal", "Step", "another object too")

    def messages(name: str, events: list[Object]) -> list[str]:
        return sorted(e["message"] for e in events if e["involvedObject"]["name"] == name)

    events = await kit.client.list_live(EVENT, namespace=namespace)
    assert messages("flooded", events) == [
        "another reason has its own budget",
        *(f"step {i}" for i in range(5)),
    ]
    assert messages("other", events) == ["another object too"]
    assert recorder.dropped == 3
    # A write comes back every `spam_refill` seconds.
    now[0] = 61.0
    await recorder.event(flooded, "Normal", "Step", "step 8")
    await recorder.event(flooded, "Normal", "Step", "step 9")
    events = await kit.client.list_live(EVENT, namespace=namespace)
    assert "step 8" in messages("flooded", events)
    assert "step 9" not in messages("flooded", events)


async def test_similar_events_are_combined_into_one_counted_event(kit: Kit, namespace: str) -> None:
    target = (await kit.client.apply(configmap("similar", namespace))).object
    now = [0.0]
    recorder = EventRecorder(
        kit.client, "reconciler-tests", max_similar=3, similar_window=60, clock=lambda: now[0]
    )
    for i in range(12):
        await recorder.event(target, "Normal", "NodeMoved", f"node n{i}: moved")
    await recorder.event(target, "Normal", "NodeMoved", "node n0: moved")  # a repeat
    await recorder.event(target, "Warning", "Other", "not similar: another reason")
    events = await kit.client.list_live(EVENT, namespace=namespace)
    moved = {e["message"]: e["count"] for e in events if e["reason"] == "NodeMoved"}
    assert moved == {
        "node n0: moved": 2,
        "node n1: moved": 1,
        "node n2: moved": 1,
        "(combined from similar events): node n11: moved": 9,
    }
    assert [e["message"] for e in events if e["reason"] == "Other"] == [
        "not similar: another reason"
    ]
    # After a quiet window, a new message has an event of its own again.
    now[0] = 61.0
    await recorder.event(target, "Normal", "NodeMoved", "node n12: moved")
    events = await kit.client.list_live(EVENT, namespace=namespace)
    assert "node n12: moved" in {e["message"] for e in events}


async def test_a_json_patch_whose_test_fails_changes_nothing(kit: Kit, namespace: str) -> None:
    """The upgrade walk's writes: a transition read from a stale copy carries a `test` of
    what it read, and none of its operations may land when that test fails."""
    await kit.client.apply(configmap("stale", namespace, a="1"))
    with pytest.raises(Invalid):
        await kit.client.patch(
            CONFIGMAP,
            "stale",
            [
                {"op": "add", "path": "/data/b", "value": "2"},
                {"op": "test", "path": "/data/a", "value": "0"},
            ],
            namespace=namespace,
            patch_type=PatchType.JSON,
        )
    live = await kit.client.get_live(CONFIGMAP, "stale", namespace)
    assert live["data"] == {"a": "1"}
