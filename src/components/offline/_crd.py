"""The CustomResourceDefinitions, generated from the models.

`gpu-operator crds` prints them; `hack/generate-crds.sh` writes them to `config/crd/`
(never edit those files by hand: a unit test fails when they differ from these).
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.api import (
    GPU_CLUSTER_SINGLETON,
    ApiModel,
    Cel,
    ClusterPolicySpec,
    ClusterPolicyStatus,
    GPUClusterSpec,
    GPUClusterStatus,
    NVIDIADriverSpec,
    NVIDIADriverStatus,
)
from components.offline._schema import Schema, schema_for_model

GROUP = "nvidia.com"
HEADER = (
    "# Generated from the models in src/components/api by `gpu-operator crds`\n"
    "# (hack/generate-crds.sh). Do not edit by hand.\n"
)


@dataclass(frozen=True)
class Kind:
    """One custom resource kind and how its CRD is named and shown."""

    kind: str
    plural: str
    singular: str
    version: str
    short_names: tuple[str, ...]
    spec: type[ApiModel]
    status: type[ApiModel]
    description: str
    extra_columns: tuple[dict[str, Any], ...] = ()
    #: Rules on the whole object (they read `self.metadata`), checked by `validate` too.
    object_rules: tuple[Cel, ...] = ()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    @property
    def file_name(self) -> str:
        return f"{GROUP}_{self.plural}.yaml"


CLUSTER_POLICY = Kind(
    kind="ClusterPolicy",
    plural="clusterpolicies",
    singular="clusterpolicy",
    version="v1",
    short_names=("nvcp", "gpupolicy"),
    spec=ClusterPolicySpec,
    status=ClusterPolicyStatus,
    description=(
        "ClusterPolicy describes the NVIDIA GPU software stack the operator installs and "
        "keeps healthy on every GPU node. With several, the oldest is used and the others "
        "are ignored."
    ),
)

NVIDIA_DRIVER = Kind(
    kind="NVIDIADriver",
    plural="nvidiadrivers",
    singular="nvidiadriver",
    version="v1alpha1",
    short_names=("nvd", "nvdriver", "nvdrivers"),
    spec=NVIDIADriverSpec,
    status=NVIDIADriverStatus,
    description=(
        "NVIDIADriver describes the NVIDIA driver for one pool of GPU nodes (used when "
        "ClusterPolicy spec.driver.useNvidiaDriverCRD is true)."
    ),
    extra_columns=({"name": "Default", "type": "boolean", "jsonPath": ".spec.default"},),
)

GPU_CLUSTER = Kind(
    kind="GPUCluster",
    plural="gpuclusters",
    singular="gpucluster",
    version="v1alpha1",
    short_names=("gc",),
    spec=GPUClusterSpec,
    status=GPUClusterStatus,
    description=(
        "GPUCluster describes the GPU stack built on Dynamic Resource Allocation (NVIDIA's "
        "DRA driver, DCGM, DCGM exporter): pods claim GPUs with ResourceClaims. At most one, "
        "named gpu-cluster, and not beside a ClusterPolicy. Accepted, not yet reconciled."
    ),
    object_rules=(GPU_CLUSTER_SINGLETON,),
)

KINDS: tuple[Kind, ...] = (CLUSTER_POLICY, NVIDIA_DRIVER, GPU_CLUSTER)


def kind_for(api_version: str, kind: str) -> Kind | None:
    """The kind a document declares, if it is one of ours."""
    return next((k for k in KINDS if k.kind == kind and k.api_version == api_version), None)


_KEY_ORDER = (
    "description", "type", "format", "enum", "default", "nullable", "anyOf",
    "x-kubernetes-int-or-string", "pattern", "minimum", "exclusiveMinimum", "maximum",
    "minLength", "maxLength", "minItems", "maxItems", "properties", "additionalProperties",
    "items", "required", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
)  # fmt: skip


def _ordered(schema: Schema) -> Schema:
    """Keys in a fixed, readable order; property maps keep their (sorted) order."""
    out: Schema = {}
    for key in sorted(schema, key=lambda k: (_KEY_ORDER.index(k) if k in _KEY_ORDER else 99, k)):
        value = schema[key]
        if key == "properties":
            value = {name: _ordered(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            value = _ordered(value)
        out[key] = value
    return out


def object_schema(kind: Kind) -> Schema:
    """The `openAPIV3Schema` of a kind."""
    return _ordered(_object_schema(kind))


def _object_schema(kind: Kind) -> Schema:
    schema: Schema = {
        "description": kind.description,
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string", "description": "The API version: group/version."},
            "kind": {"type": "string", "description": "The kind of object."},
            "metadata": {"type": "object"},
            "spec": schema_for_model(kind.spec),
            "status": schema_for_model(kind.status),
        },
    }
    if kind.object_rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in kind.object_rules]
    return schema


def crd(kind: Kind) -> dict[str, Any]:
    """The CustomResourceDefinition of a kind."""
    columns = [
        {"name": "Status", "type": "string", "jsonPath": ".status.state"},
        *kind.extra_columns,
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name,
            "labels": {"app.kubernetes.io/part-of": "gpu-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.singular,
                "shortNames": list(kind.short_names),
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": kind.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": object_schema(kind)},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literal blocks, no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def to_yaml(document: dict[str, Any]) -> str:
    """YAML the way the repository stores it: keys in the given order, 2-space indent."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def render(kind: Kind) -> str:
    """One CRD file's text (with the do-not-edit header)."""
    return HEADER + "---\n" + to_yaml(crd(kind))


def render_all() -> str:
    """Every CRD, as one multi-document YAML stream (what `gpu-operator crds` prints)."""
    return "".join(render(kind) for kind in KINDS)


def write_all(directory: Path) -> list[Path]:
    """Write each CRD to `directory/<group>_<plural>.yaml`; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path = directory / kind.file_name
        path.write_text(render(kind))
        written.append(path)
    return written


# --- the CEL rules, for the offline validator ------------------------------------------


def _cels_in(annotation: Any, seen: set[type[ApiModel]]) -> Iterator[Cel]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        yield from (m for m in extra if isinstance(m, Cel))
        yield from _cels_in(inner, seen)
    elif origin is not None:
        for arg in typing.get_args(annotation):
            yield from _cels_in(arg, seen)
    elif isinstance(annotation, type) and issubclass(annotation, ApiModel):
        yield from _model_cels(annotation, seen)


def _model_cels(model: type[ApiModel], seen: set[type[ApiModel]]) -> Iterator[Cel]:
    if model in seen:
        return
    seen.add(model)
    yield from model.cel_rules
    for info in model.model_fields.values():
        yield from (m for m in info.metadata if isinstance(m, Cel))
        yield from _cels_in(info.annotation, seen)


def cel_rules() -> dict[str, Cel]:
    """Every CEL rule in the CRDs, by rule text."""
    seen: set[type[ApiModel]] = set()
    rules: dict[str, Cel] = {}
    for kind in KINDS:
        for rule in kind.object_rules:
            rules.setdefault(rule.rule, rule)
        for model in (kind.spec, kind.status):
            for rule in _model_cels(model, seen):
                rules.setdefault(rule.rule, rule)
    return rules
