"""The TLS side of secure metrics: a serving context from a certificate folder, or from a
self-signed certificate made at start.

A folder holds `tls.crt` and `tls.key` (the keys of a `kubernetes.io/tls` Secret, so a
cert-manager Certificate mounts as is). Without one the server makes its own certificate,
valid for a year and never written anywhere that outlives the process: scrapers then skip
verification (`insecureSkipVerify`), as they do for controller-runtime's self-signed
default. The bearer token still authenticates the scraper; TLS keeps it off the wire.

This is the one module of the operator that needs `cryptography`; the import-linter
contract in pyproject.toml keeps it that way.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
_VALIDITY = datetime.timedelta(days=365)


def self_signed_pem(hostnames: list[str]) -> tuple[bytes, bytes]:
    """A self-signed serving certificate and its key, PEM, for `hostnames`."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hostnames]), False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def serving_context(cert_dir: str | None) -> ssl.SSLContext:
    """A TLS 1.2+ server context: `cert_dir`'s `tls.crt`/`tls.key`, else self-signed."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir is not None:
        folder = Path(cert_dir)
        context.load_cert_chain(folder / CERT_FILE, folder / KEY_FILE)
        return context
    cert, key = self_signed_pem([socket.gethostname(), "localhost"])
    # ssl reads certificates from files only: a private folder, removed once loaded.
    with tempfile.TemporaryDirectory(prefix="metrics-tls-") as tmp:
        (Path(tmp) / CERT_FILE).write_bytes(cert)
        key_path = Path(tmp) / KEY_FILE
        key_path.touch(mode=0o600)
        key_path.write_bytes(key)
        context.load_cert_chain(Path(tmp) / CERT_FILE, key_path)
    return context
