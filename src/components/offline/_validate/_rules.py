"""The rules for a whole document: which kind it is, a valid name, then the schema walk
over its spec and, once that passes, the typed model."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from components.api import (
    ROLLBACK_ANNOTATION,
    ApiModel,
    ClusterPolicy,
    GPUCluster,
    NVIDIADriver,
    rollback_request,
)
from components.offline._crd import (
    CLUSTER_POLICY,
    GPU_CLUSTER,
    KINDS,
    NVIDIA_DRIVER,
    Kind,
    object_schema,
)
from components.offline._validate._cel import holds
from components.offline._validate._encoded import encoded_problems
from components.offline._validate._problems import Problem, pydantic_problems, show, type_name
from components.offline._validate._walk import SchemaChecker
from components.offline._validate._windows import window_problems

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MODELS: dict[str, type[ApiModel]] = {
    CLUSTER_POLICY.kind: ClusterPolicy,
    NVIDIA_DRIVER.kind: NVIDIADriver,
    GPU_CLUSTER.kind: GPUCluster,
}
#: Our API group: every kind in it is ours to judge, known or not.
_GROUP = CLUSTER_POLICY.api_version.split("/")[0]
_KIND_NAMES = [k.kind for k in KINDS]


def _group(api_version: Any) -> str | None:
    """The API group of an apiVersion (`v1`, the core group, has none)."""
    if not isinstance(api_version, str) or "/" not in api_version:
        return None
    return api_version.split("/")[0]


def _near(word: str, choices: list[str]) -> str | None:
    """The choice `word` is a case or spelling variant of, if any."""
    folded = {c.lower(): c for c in choices}
    if word.lower() in folded:
        return folded[word.lower()]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.8)
    return close[0] if close else None


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


def object_rule_problems(kind: Kind, document: dict[str, Any]) -> Iterator[Problem]:
    """The kind's rules on the whole object (a GPUCluster's fixed name), which the API
    server reports against the object, here against the name they read."""
    for rule in kind.object_rules:
        if not holds(rule.rule, document):
            yield Problem("metadata.name", rule.message)


def rollback_problems(kind: Kind, document: dict[str, Any]) -> Iterator[Problem]:
    """A driver rollback request the operator would refuse (`ROLLBACK_ANNOTATION`): the API
    server takes any annotation, the operator only `failed` or `all`."""
    if kind.kind not in (CLUSTER_POLICY.kind, NVIDIA_DRIVER.kind):
        return
    metadata = document.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict) or ROLLBACK_ANNOTATION not in annotations:
        return
    problem = rollback_request({"metadata": {"annotations": annotations}}).problem
    if problem:
        yield Problem(f"metadata.annotations.{ROLLBACK_ANNOTATION}", problem)


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
        if kind_name is None:
            return [Problem("kind", f"required field is missing: {known}")]
        near = _near(kind_name, _KIND_NAMES) if isinstance(kind_name, str) else None
        fix = f'write "{near}"' if near else f"validate knows {known}"
        return [Problem("kind", f"{show(kind_name)} is not a kind of {_GROUP}; {fix}")]
    if api_version != kind.api_version:
        wanted = f"must be {kind.api_version} for a {kind.kind}, not {show(api_version)}"
        return [Problem("apiVersion", wanted)]
    encoded, refused = encoded_problems(document)
    if refused:
        return encoded  # the API server cannot take it at all: no use walking it
    problems = list(metadata_problems(document.get("metadata")))
    if not problems:
        problems.extend(object_rule_problems(kind, document))
        problems.extend(rollback_problems(kind, document))
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
    if encoded:  # numbers read as floats: the walk's word on the same field is redundant
        reported = {p.path for p in encoded}
        problems = [*encoded, *(p for p in problems if p.path not in reported)]
    if not problems:
        problems.extend(pydantic_problems(_MODELS[kind.kind], document))
    if not problems:
        problems.extend(window_problems(document))
    return problems


def is_ours(document: Any) -> bool:
    """Whether a document is ours to judge: any kind in our API group (nvidia.com), and a
    ClusterPolicy or NVIDIADriver, or a case or spelling variant of one (`Clusterpolicy`),
    unless its apiVersion names another project's group (Kyverno has a ClusterPolicy in
    kyverno.io). Every other resource (a Namespace, a ConfigMap) is passed over, as
    `kubectl apply` of the same file would create it without our rules."""
    if not isinstance(document, dict):
        return False
    group, kind = _group(document.get("apiVersion")), document.get("kind")
    if group == _GROUP:
        return True
    if not isinstance(kind, str) or _near(kind, _KIND_NAMES) is None:
        return False
    return group is None or "." not in group or _near(group, [_GROUP]) is not None
