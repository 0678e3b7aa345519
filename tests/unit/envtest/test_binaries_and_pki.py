"""The test control plane's pieces that need no running process."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from reconciler import envtest
from reconciler.envtest import Binaries, BinaryMissingError, ControlPlane
from reconciler.envtest._pki import generate

pytestmark = pytest.mark.unit


def test_cache_folder_moves_with_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPU_OPERATOR_CACHE", str(tmp_path))
    binaries = Binaries.from_cache()
    assert binaries.kube_apiserver == (
        tmp_path / "bin" / f"kubernetes-{envtest.KUBERNETES_VERSION}" / "kube-apiserver"
    )
    assert binaries.etcd.parent.name == f"etcd-{envtest.ETCD_VERSION}"


def test_missing_binary_names_it_and_the_build_command(tmp_path: Path) -> None:
    plane = ControlPlane(binaries=Binaries.from_cache(tmp_path))
    with pytest.raises(BinaryMissingError) as caught:
        plane.start()
    message = str(caught.value)
    assert "etcd is missing" in message
    assert "hack/build-binaries.sh" in message


def test_certificates_chain_to_the_ca_and_admin_is_system_masters(tmp_path: Path) -> None:
    pki = generate(tmp_path, ["127.0.0.1", "localhost"])
    admin = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    groups = admin.subject.get_attributes_for_oid(x509.oid.NameOID.ORGANIZATION_NAME)
    assert [g.value for g in groups] == ["system:masters"]
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    # A client that trusts only our CA accepts the chain the apiserver serves.
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    assert oct(pki.admin_key.stat().st_mode & 0o777) == "0o600"
