"""Asking the cache twice for one kind: the same informer, or an error, never a surprise."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from reconciler import GVK, Cache, Object
from reconciler.lowlevel import RESTMapper, Transport

pytestmark = pytest.mark.unit

CM = GVK("", "v1", "ConfigMap")


class _NoApi:
    configuration = type("C", (), {"host": "https://unused"})()


def make_cache() -> Cache:
    transport = Transport(_NoApi())
    return Cache(transport, RESTMapper(transport))


def keep(obj: Object) -> Object:
    return obj


def test_a_second_call_gets_the_same_informer_with_more_indexers() -> None:
    cache = make_cache()
    first = cache.informer(CM, drop=[("data",)], transform=keep)
    again = cache.informer(CM, index_labels=["app"], transform=keep)
    assert again is first
    assert "label:app" in again.store.index_names


def test_a_second_call_with_another_transform_is_an_error() -> None:
    cache = make_cache()
    cache.informer(CM, transform=keep)
    with pytest.raises(ValueError, match="transform"):
        cache.informer(CM, transform=lambda o: o)
    with pytest.raises(ValueError, match="transform"):
        cache.informer(CM)


def test_a_second_call_dropping_other_fields_is_an_error() -> None:
    cache = make_cache()
    cache.informer(CM, drop=[("data",)])
    assert cache.informer(CM, drop=[("data",)]) is cache.informer(CM)
    with pytest.raises(ValueError, match="dropping"):
        cache.informer(CM, drop=[("binaryData",)])


def test_a_second_call_with_another_scope_is_an_error() -> None:
    cache = make_cache()
    cache.informer(CM, namespace="a")
    with pytest.raises(ValueError, match="scope"):
        cache.informer(CM, namespace="b")


class _Kept(TypedDict, total=False):
    data: Any


class _Other(TypedDict, total=False):
    binaryData: Any


def test_a_second_call_with_another_schema_is_an_error() -> None:
    cache = make_cache()
    first = cache.informer(CM, schema=_Kept)
    assert cache.informer(CM, schema=_Kept) is first
    assert cache.informer(CM) is first, "no schema asked: any will do"
    with pytest.raises(ValueError, match="cached as"):
        cache.informer(CM, schema=_Other)
