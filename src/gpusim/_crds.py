"""Install the CRDs into a simulated cluster before an operator runs on it.

The operator itself writes through the reconciler's client; this is for the one-off
installs the demo, the tests and the benchmarks do on a fresh cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from reconciler import name_of

FIELD_MANAGER = "gpu-operator"
_ESTABLISH_SECONDS = 30.0


async def _established(ext: Any, name: str) -> None:
    try:
        async with asyncio.timeout(_ESTABLISH_SECONDS):
            while True:
                crd = await ext.read_custom_resource_definition(name)
                conditions = (crd.status.conditions if crd.status else None) or []
                if any(c.type == "Established" and c.status == "True" for c in conditions):
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise TimeoutError(
            f"CRD {name} was not Established within {_ESTABLISH_SECONDS:.0f}s"
        ) from None


async def apply_crds(api: client.ApiClient, documents: Iterable[dict[str, Any]]) -> list[str]:
    """Server-side apply each CRD and wait until the apiserver serves it."""
    # Typed as Any: the generated client hides `_content_type` in **kwargs.
    ext: Any = client.ApiextensionsV1Api(api)
    names: list[str] = []
    for document in documents:
        if document.get("kind") != "CustomResourceDefinition":
            raise ValueError(f"expected a CustomResourceDefinition, got {document.get('kind')}")
        name = name_of(document)
        await ext.patch_custom_resource_definition(
            name,
            document,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        names.append(name)
    for name in names:
        await _established(ext, name)
    return names


def load_documents(files: Iterable[Path]) -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in files:
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return documents
