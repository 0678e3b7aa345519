"""The cache store and its indices."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler import OWNER_INDEX, ObjectKey, by_label, by_owner_uid, label_index_name
from reconciler.lowlevel import NAMESPACE_INDEX, Store, by_namespace

pytestmark = pytest.mark.unit


def pod(
    name: str, ns: str = "default", labels: dict[str, str] | None = None, owner: str = ""
) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "uid": owner}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def make_store() -> Store:
    return Store(
        {
            NAMESPACE_INDEX: by_namespace,
            OWNER_INDEX: by_owner_uid,
            label_index_name("app"): by_label("app"),
        }
    )


def test_indices_answer_and_follow_updates_and_deletes() -> None:
    store = make_store()
    store.upsert(pod("a", labels={"app": "x"}, owner="u1"))
    store.upsert(pod("b", ns="other", labels={"app": "x"}, owner="u1"))
    store.upsert(pod("c", labels={"app": "y"}))
    assert {o["metadata"]["name"] for o in store.by_index(OWNER_INDEX, "u1")} == {"a", "b"}
    assert {o["metadata"]["name"] for o in store.by_index(NAMESPACE_INDEX, "default")} == {"a", "c"}
    assert {o["metadata"]["name"] for o in store.by_index("label:app", "x")} == {"a", "b"}

    old = store.upsert(pod("a", labels={"app": "y"}))  # relabelled, owner dropped
    assert old is not None
    assert {o["metadata"]["name"] for o in store.by_index("label:app", "x")} == {"b"}
    assert {o["metadata"]["name"] for o in store.by_index("label:app", "y")} == {"a", "c"}
    assert {o["metadata"]["name"] for o in store.by_index(OWNER_INDEX, "u1")} == {"b"}

    store.delete(ObjectKey("other", "b"))
    assert store.by_index(OWNER_INDEX, "u1") == []
    assert store.index_keys("label:app", "x") == set()
    assert len(store) == 2


def test_index_added_later_covers_existing_objects() -> None:
    store = Store()
    store.upsert(pod("a", labels={"tier": "gpu"}))
    store.add_indexers({"label:tier": by_label("tier")})
    assert [o["metadata"]["name"] for o in store.by_index("label:tier", "gpu")] == ["a"]


def test_unknown_index_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="no index named"):
        Store().by_index("nope", "x")


def test_cluster_scoped_objects_key_on_empty_namespace() -> None:
    store = Store()
    store.upsert({"metadata": {"name": "node-1"}})
    assert store.get(ObjectKey("", "node-1")) is not None
