"""Certificates for loopback TLS servers, and a CA folder under OpenSSL's hashed names."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from support.real import unavailable


def self_signed(certificate: Path, key_file: Path) -> None:
    """A certificate for 127.0.0.1 that is its own CA (an hour long), and its key, as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    issued = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certificate.write_bytes(issued.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def hashed_folder(folder: Path, *certificates: Path) -> Path:
    """folder holding the certificates as `update-ca-certificates` would: <subject hash>.0."""
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("naming CA certificates by their subject hash needs Debian's openssl")
    folder.mkdir(parents=True, exist_ok=True)
    for certificate in certificates:
        subject_hash = subprocess.run(
            [openssl, "x509", "-hash", "-noout", "-in", str(certificate)],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()  # fmt: skip
        (folder / f"{subject_hash}.0").symlink_to(certificate)
    return folder
