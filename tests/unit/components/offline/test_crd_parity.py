"""Parity with the reference's CRDs: every field of theirs is in ours, with the same type,
enum, default, format and required entries, so a manifest written for the reference is
neither pruned nor rejected by ours.

The walk is over their schema; what ours adds (status components, upgrade, short names, CEL
rules) is not looked at. The only differences allowed are listed in `ALLOWED`, each with
the reason it is deliberate.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.offline import CLUSTER_POLICY, GPU_CLUSTER, KINDS, NVIDIA_DRIVER, Kind, crd
from tests.unit.components.api.cases import REFERENCE_CRDS

pytestmark = pytest.mark.unit

Schema = dict[str, Any]

#: Differences we keep on purpose (each makes ours accept more, never less).
ALLOWED: dict[str, set[str]] = {
    # A ClusterPolicy may leave out whole sections (our minimal sample does): the defaults
    # are the reference's Helm values, so `spec: {}` means what the chart's output means.
    "ClusterPolicy": {
        "spec: required ['daemonsets', 'dcgm', 'dcgmExporter', 'devicePlugin', 'driver', "
        "'gfd', 'nodeStatusExporter', 'operator', 'toolkit'] != ours []",
    },
    "NVIDIADriver": set(),
    "GPUCluster": set(),
}


def open_api(document: dict[str, Any]) -> Schema:
    schema: Schema = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def reference(kind: Kind) -> Schema:
    (document,) = [d for d in yaml.safe_load_all(REFERENCE_CRDS[kind.kind].read_text()) if d]
    return open_api(document)


def type_of(schema: Schema) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    kind: str | None = schema.get("type")
    return kind


def differences(theirs: Schema, ours: Schema | None, path: str) -> list[str]:
    """What ours lacks or changes of `theirs` at `path` and below."""
    if ours is None:
        return [f"{path}: missing"]
    out: list[str] = []
    if type_of(theirs) != type_of(ours):
        out.append(f"{path}: type {type_of(theirs)} != ours {type_of(ours)}")
    if theirs.get("enum") != ours.get("enum") and (
        sorted(map(str, theirs.get("enum") or [])) != sorted(map(str, ours.get("enum") or []))
    ):
        out.append(f"{path}: enum {theirs.get('enum')} != ours {ours.get('enum')}")
    for key in ("default", "format"):
        if theirs.get(key) != ours.get(key):
            out.append(f"{path}: {key} {theirs.get(key)!r} != ours {ours.get(key)!r}")
    if sorted(theirs.get("required", [])) != sorted(ours.get("required", [])):
        out.append(
            f"{path}: required {sorted(theirs.get('required', []))} != ours "
            f"{sorted(ours.get('required', []))}"
        )
    if theirs.get("x-kubernetes-preserve-unknown-fields") and not ours.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        out.append(f"{path}: ours prunes unknown fields, theirs keeps them")
    their_properties = theirs.get("properties", {})
    if their_properties and "properties" not in ours:
        return [*out, f"{path}: ours is free-form, theirs is typed"]
    for name, child in their_properties.items():
        out.extend(differences(child, ours["properties"].get(name), f"{path}.{name}"))
    if "items" in theirs:
        out.extend(differences(theirs["items"], ours.get("items"), f"{path}[]"))
    if isinstance(theirs.get("additionalProperties"), dict):
        mine = ours.get("additionalProperties")
        out.extend(
            differences(
                theirs["additionalProperties"],
                mine if isinstance(mine, dict) else None,
                f"{path}{{}}",
            )
        )
    return out


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_ours_accepts_every_field_of_theirs_alike(kind: Kind) -> None:
    theirs, ours = reference(kind), open_api(crd(kind))
    found = differences(theirs["properties"]["spec"], ours["properties"]["spec"], "spec")
    found += differences(theirs["properties"]["status"], ours["properties"]["status"], "status")
    assert sorted(set(found) - ALLOWED[kind.kind]) == []
    assert ALLOWED[kind.kind] <= set(found), "an allowed difference is gone: drop it from ALLOWED"


def test_the_walk_finds_what_ours_lacks_or_changes() -> None:
    theirs: Schema = {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": "string", "enum": ["x", "y"], "default": "x"},
            "b": {"type": "integer", "format": "int64"},
            "c": {"type": "object", "properties": {"d": {"type": "boolean"}}},
            "e": {"type": "array", "items": {"type": "string"}},
        },
    }
    ours: Schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "enum": ["x"]},
            "b": {"type": "integer"},
            "c": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "e": {"type": "array", "items": {"type": "integer"}},
        },
    }
    assert differences(theirs, ours, "spec") == [
        "spec: required ['a'] != ours []",
        "spec.a: enum ['x', 'y'] != ours ['x']",
        "spec.a: default 'x' != ours None",
        "spec.b: format 'int64' != ours None",
        "spec.c: ours is free-form, theirs is typed",
        "spec.e[]: type string != ours integer",
    ]


def test_every_reference_crd_is_a_kind_we_serve() -> None:
    for kind in (CLUSTER_POLICY, NVIDIA_DRIVER, GPU_CLUSTER):
        document = yaml.safe_load(REFERENCE_CRDS[kind.kind].read_text())
        assert document["spec"]["names"]["kind"] == kind.kind
        assert document["spec"]["versions"][0]["name"] == kind.version


def reference_document(kind: Kind) -> dict[str, Any]:
    (document,) = [d for d in yaml.safe_load_all(REFERENCE_CRDS[kind.kind].read_text()) if d]
    return document


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_kubectl_get_shows_the_references_columns_and_takes_its_short_names(kind: Kind) -> None:
    theirs, ours = reference_document(kind), crd(kind)
    columns = [
        (c["name"], c["jsonPath"])
        for c in theirs["spec"]["versions"][0]["additionalPrinterColumns"]
    ]
    assert [
        (c["name"], c["jsonPath"]) for c in ours["spec"]["versions"][0]["additionalPrinterColumns"]
    ] == columns
    assert set(theirs["spec"]["names"].get("shortNames", [])) <= set(
        ours["spec"]["names"]["shortNames"]
    )
    assert ours["spec"]["scope"] == theirs["spec"]["scope"]
    assert (
        ours["spec"]["versions"][0]["subresources"] == theirs["spec"]["versions"][0]["subresources"]
    )


def test_gpucluster_keeps_the_references_rule_on_the_whole_object() -> None:
    """The reference's GPUCluster is a singleton by name; ours refuses what theirs does."""
    theirs = open_api(reference_document(GPU_CLUSTER))["x-kubernetes-validations"]
    ours = open_api(crd(GPU_CLUSTER))["x-kubernetes-validations"]
    assert [r["rule"] for r in ours] == [r["rule"] for r in theirs]
