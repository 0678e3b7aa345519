"""Where the simulator finds its binaries, and that their versions are the build script's."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusim import KWOK_VERSION, REGISTRY_VERSION, SimBinaries, SimulatedCluster
from reconciler import envtest
from reconciler.envtest import BinaryMissingError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_versions_match_the_build_script() -> None:
    pinned = dict(
        line.split("=", 1)
        for line in (REPO / "hack" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pinned == {
        "KUBERNETES_VERSION": envtest.KUBERNETES_VERSION,
        "ETCD_VERSION": envtest.ETCD_VERSION,
        "KWOK_VERSION": KWOK_VERSION,
        "REGISTRY_VERSION": REGISTRY_VERSION,
    }


def test_simulator_binaries_sit_beside_the_control_planes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPU_OPERATOR_CACHE", str(tmp_path))
    binaries = SimBinaries.from_cache()
    kubernetes = tmp_path / "bin" / f"kubernetes-{envtest.KUBERNETES_VERSION}"
    assert binaries.kube_apiserver == kubernetes / "kube-apiserver"
    assert binaries.kube_scheduler == kubernetes / "kube-scheduler"
    assert binaries.kwok == tmp_path / "bin" / f"kwok-{KWOK_VERSION}" / "kwok"


def test_a_missing_simulator_binary_names_it_and_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(BinaryMissingError) as caught:
        SimulatedCluster(binaries=SimBinaries.from_cache(tmp_path)).start()
    message = str(caught.value)
    assert "etcd is missing" in message
    assert "hack/build-binaries.sh" in message
