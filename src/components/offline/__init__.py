"""What the command line does with the API without a cluster: the CRDs generated from the
models (`gpu-operator crds`, `hack/generate-crds.sh`, and the Helm hook that installs them)
and manifests checked offline against them (`gpu-operator validate`).

These serve a person at a terminal, the build or the install hook, never the controllers, so
they live
above `components.api` (an import contract keeps `api` from reaching them): `api` stays the
types and the pure rules the controllers share.

    crd(CLUSTER_POLICY)            # the CustomResourceDefinition as a dict
    render_all()                   # every CRD as YAML, as `gpu-operator crds` prints them
    validate_text(text, "a.yaml")  # a Report: problems with line numbers, as the API
                                   # server would refuse them
"""

from __future__ import annotations

from components.offline._crd import (
    CLUSTER_POLICY,
    GPU_CLUSTER,
    KINDS,
    NVIDIA_DRIVER,
    Kind,
    crd,
    object_schema,
    render,
    render_all,
    write_all,
)
from components.offline._validate import (
    Report,
    validate_document,
    validate_files,
    validate_stream,
    validate_text,
)

__all__ = [
    "CLUSTER_POLICY",
    "GPU_CLUSTER",
    "KINDS",
    "NVIDIA_DRIVER",
    "Kind",
    "Report",
    "crd",
    "object_schema",
    "render",
    "render_all",
    "validate_document",
    "validate_files",
    "validate_stream",
    "validate_text",
    "write_all",
]
