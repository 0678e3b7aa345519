"""Decoding that skips dropped paths gives exactly what decoding whole and dropping gives."""

from __future__ import annotations

import copy
import json
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler._decode import ObjectDecoder, build_plan, decode_identity, page_decoder
from reconciler._trim import Trimmer, drop_paths, may_keep

pytestmark = pytest.mark.unit

KEYS = st.sampled_from(["a", "b", "c", "metadata", "status"])
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=25,
)
paths = st.lists(st.lists(KEYS | st.just("*"), min_size=1, max_size=4), max_size=4)


@settings(max_examples=400, deadline=None)
@given(obj=st.dictionaries(KEYS, values, max_size=5), drop=paths)
def test_same_as_decoding_whole_then_dropping(obj: dict[str, Any], drop: list[list[str]]) -> None:
    expected = copy.deepcopy(obj)
    drop_paths(expected, drop)
    assert ObjectDecoder(drop).object(json.dumps(obj).encode()) == expected


def test_plan_keeps_a_whole_drop_over_deeper_ones() -> None:
    assert build_plan([("a",), ("a", "b")]) == {"a": None}
    assert build_plan([("a", "b"), ("a", "c", "d")]) == {"a": {"b": None, "c": {"d": None}}}


def test_lists_and_events() -> None:
    decoder = ObjectDecoder([("metadata", "managedFields"), ("status", "conditions", "*", "t")])
    node = {
        "metadata": {"name": "n", "managedFields": [{"manager": "x"}]},
        "status": {"conditions": [{"type": "Ready", "t": "now"}]},
    }
    items, meta = decoder.list(
        json.dumps({"metadata": {"resourceVersion": "5"}, "items": [node]}).encode()
    )
    assert meta == {"resourceVersion": "5"}
    assert items == [{"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready"}]}}]
    kind, obj = decoder.event(json.dumps({"type": "MODIFIED", "object": node}).encode())
    assert kind == "MODIFIED" and "managedFields" not in obj["metadata"]
    kind, status = decoder.event(b'{"type":"ERROR","object":{"kind":"Status","code":410}}')
    assert kind == "ERROR" and status["code"] == 410
    empty, _ = decoder.list(b'{"kind":"NodeList","metadata":{},"items":null}')
    assert empty == []


def _drop_one(node: Any, path: list[str]) -> None:
    """The meaning of one path, written plainly: the oracle for the one-walk trimmer."""
    if not path:
        return
    head, rest = path[0], path[1:]
    if head == "*":
        children = node if isinstance(node, list) else list(node.values()) if isinstance(
            node, dict
        ) else []  # fmt: skip
        if not rest:
            if isinstance(node, list | dict):
                node.clear()
            return
        for child in children:
            _drop_one(child, rest)
    elif isinstance(node, dict):
        if not rest:
            node.pop(head, None)
        elif head in node:
            _drop_one(node[head], rest)


@settings(max_examples=400, deadline=None)
@given(obj=st.dictionaries(KEYS, values, max_size=5), drop=paths)
def test_dropping_every_path_in_one_walk_is_dropping_each(
    obj: dict[str, Any], drop: list[list[str]]
) -> None:
    expected = copy.deepcopy(obj)
    for path in drop:
        _drop_one(expected, path)
    got = copy.deepcopy(obj)
    drop_paths(got, drop)
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(KEYS, values, max_size=5), drop=paths)
def test_an_informer_caches_the_same_whatever_the_decoder_left_to_the_trimmer(
    obj: dict[str, Any], drop: list[list[str]]
) -> None:
    # The informer's decoder skips only shallow paths; the trimmer drops the rest.
    trimmer = Trimmer(drop)
    raw = json.dumps(obj).encode()
    split = trimmer(ObjectDecoder(trimmer.decoder_paths).object(raw))
    assert split == trimmer(ObjectDecoder(trimmer.paths).object(raw))


class _Condition(TypedDict, total=False):
    type: Any
    status: Any


class _Status(TypedDict, total=False):
    phase: Any
    conditions: list[_Condition] | None


class _Meta(TypedDict, total=False):
    name: Any
    labels: Any


class _Pod(TypedDict, total=False):
    metadata: _Meta
    status: _Status


POD = {
    "metadata": {"name": "p", "labels": {"a": "1"}, "managedFields": [{"manager": "x"}]},
    "spec": {"containers": [{"name": "c"}]},
    "status": {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}],
    },
}


def test_a_schema_keeps_only_what_it_names_at_every_level() -> None:
    decoder = ObjectDecoder(schema=_Pod)
    assert decoder.object(json.dumps(POD).encode()) == {
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    no_list = {"metadata": {"name": "q"}, "status": {"conditions": None}}
    assert decoder.object(json.dumps(no_list).encode()) == no_list
    listed = {"metadata": {"resourceVersion": "7"}, "items": [POD]}
    items, meta = decoder.list(json.dumps(listed).encode())
    assert items[0]["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert meta == {"resourceVersion": "7"}


def test_a_schema_leaves_an_error_event_whole() -> None:
    """An ERROR event carries a Status, not the kind: its code and message must survive."""
    status = {"kind": "Status", "code": 410, "message": "too old resource version"}
    line = json.dumps({"type": "ERROR", "object": status}).encode()
    assert ObjectDecoder(schema=_Pod).event(line) == ("ERROR", status)


def test_the_trimmer_walks_only_the_paths_a_schema_lets_through() -> None:
    assert may_keep(_Pod, ("metadata", "labels", "x")), "labels are kept whole"
    assert not may_keep(_Pod, ("metadata", "managedFields"))
    assert not may_keep(_Pod, ("status", "conditions", "*", "lastProbeTime"))
    assert may_keep(_Pod, ("status", "conditions", "*", "status"))
    assert not may_keep(_Pod, ("spec", "volumes"))
    trimmer = Trimmer([("status", "conditions", "*", "status"), ("spec",)], schema=_Pod)
    pod = ObjectDecoder(schema=_Pod).object(json.dumps(POD).encode())
    assert trimmer(pod)["status"]["conditions"] == [{"type": "Ready"}]


def _as_sent(kind: str, obj: Any) -> bytes:
    """A watch event as the API server writes it: compact, `type` first."""
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode()


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(KEYS, values, max_size=5), drop=paths)
def test_an_event_as_the_server_sends_it_decodes_as_its_object_alone(
    obj: dict[str, Any], drop: list[list[str]]
) -> None:
    decoder = ObjectDecoder(drop)
    line = _as_sent("MODIFIED", obj)
    assert decoder.event(line) == ("MODIFIED", decoder.object(json.dumps(obj).encode()))


def test_a_schema_decodes_an_event_as_sent_as_its_object_alone() -> None:
    decoder = ObjectDecoder(schema=_Pod)
    for kind in ("ADDED", "MODIFIED", "DELETED"):
        assert decoder.event(_as_sent(kind, POD)) == (kind, decoder.object(json.dumps(POD)))


@pytest.mark.parametrize(
    "status",
    [
        {"kind": "Status", "code": 410, "message": "too old resource version"},
        {"kind": "Status", "status": "Failure", "code": 410, "reason": "Expired"},
    ],
    ids=["fits-the-schema", "does-not"],
)
def test_an_error_event_as_sent_survives_whole(status: dict[str, Any]) -> None:
    for decoder in (ObjectDecoder(schema=_Pod), ObjectDecoder([("status",)])):
        assert decoder.event(_as_sent("ERROR", status)) == ("ERROR", status)


def test_an_event_whose_object_is_not_an_object_is_refused() -> None:
    for decoder in (ObjectDecoder(schema=_Pod), ObjectDecoder([("status",)]), ObjectDecoder()):
        with pytest.raises(ValueError, match=r"(?i)expected .*object"):
            decoder.event(b'{"type":"ADDED","object":[1]}')


def test_a_page_decoded_by_a_schema_keeps_its_continue_token_and_what_it_names() -> None:
    pod = {
        "metadata": {"name": "p", "labels": {"a": "1"}, "managedFields": [{"manager": "x"}]},
        "spec": {"volumes": [{"name": "v"}]},
        "status": {"phase": "Running"},
    }
    page = {"kind": "PodList", "metadata": {"continue": "t0k", "resourceVersion": "9"}}
    read = page_decoder(_Pod)
    doc = read(json.dumps({**page, "items": [pod, pod]}).encode())
    assert doc["metadata"] == {"continue": "t0k", "resourceVersion": "9"}
    kept = {"metadata": {"name": "p", "labels": {"a": "1"}}, "status": {"phase": "Running"}}
    assert doc["items"] == [kept, kept]
    assert read(b'{"kind":"PodList","metadata":{},"items":null}')["items"] == []
    assert page_decoder(_Pod) is read  # built once per schema


def test_an_identity_is_what_names_a_written_object_and_no_more() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {"a": "1"},
            "managedFields": [{"manager": "x"}],
        },
        "status": {"images": [{"names": ["i"]}]},
    }
    assert decode_identity(json.dumps(node).encode()) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "uid": "u", "resourceVersion": "7"},
    }
