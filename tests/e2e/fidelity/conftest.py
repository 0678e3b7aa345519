"""NVIDIA's GPU Operator, built once per session (hack/build-reference.sh, cached like the
control plane); the fidelity tests skip, saying why, on a machine that cannot build it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusim import ReferenceUnavailable, build_reference


@pytest.fixture(scope="session")
def reference_folder() -> Path:
    try:
        return build_reference()
    except ReferenceUnavailable as exc:
        pytest.skip(f"{str(exc).rstrip('.')}; there is nothing to compare ours with.")
