"""The rules for a whole document: which kind it is, a valid name, then the schema walk
over its spec and, once that passes, the typed model."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from components.api._base import ApiModel
from components.api._clusterpolicy import ClusterPolicy
from components.api._crd import CLUSTER_POLICY, KINDS, NVIDIA_DRIVER, object_schema
from components.api._nvidiadriver import NVIDIADriver
from components.api._validate._problems import Problem, pydantic_problems, show, type_name
from components.api._validate._walk import SchemaChecker

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MODELS: dict[str, type[ApiModel]] = {
    CLUSTER_POLICY.kind: ClusterPolicy,
    NVIDIA_DRIVER.kind: NVIDIADriver,
}


def metadata_problems(metadata: Any) -> Iterator[Problem]:
    """A name the API server accepts (or a `generateName` it fills in)."""
    if not isinstance(metadata, dict):
        yield Problem("metadata", "required field is missing (an object with a name)")
        return
    name = metadata.get("name")
    if name is None and metadata.get("generateName"):
        return
    if not isinstance(name, str) or not name:
        yield Problem("metadata.name", "required field is missing")
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        yield Problem(
            "metadata.name",
            f"{show(name)} is not a valid name: lower case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters",
        )


def validate_document(document: Any) -> list[Problem]:
    """Problems of one document (an already-parsed YAML/JSON object)."""
    if not isinstance(document, dict):
        kind_of = type_name(document)
        return [Problem("", f"must be an object (a Kubernetes resource), not {kind_of}")]
    api_version = document.get("apiVersion")
    kind_name = document.get("kind")
    kind = next((k for k in KINDS if k.kind == kind_name), None)
    if kind is None:
        known = " or ".join(f"{k.kind} ({k.api_version})" for k in KINDS)
        return [Problem("kind", f"{show(kind_name)} is not a {known}")]
    if api_version != kind.api_version:
        wanted = f"must be {kind.api_version} for a {kind.kind}, not {show(api_version)}"
        return [Problem("apiVersion", wanted)]
    problems = list(metadata_problems(document.get("metadata")))
    checker = SchemaChecker()
    schema = object_schema(kind)
    for key, value in document.items():
        if key == "status":
            continue  # the status subresource: the API server ignores it on create/update
        if key not in schema["properties"]:
            checker.add(str(key), f'unknown field "{key}"')
        elif key == "spec":
            checker.check(value, schema["properties"]["spec"], "spec")
    problems.extend(checker.problems)
    if not problems:
        problems.extend(pydantic_problems(_MODELS[kind.kind], document))
    return problems


def is_ours(document: Any) -> bool:
    """Whether a document claims to be a ClusterPolicy or NVIDIADriver."""
    return isinstance(document, dict) and any(k.kind == document.get("kind") for k in KINDS)
