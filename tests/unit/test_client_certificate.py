"""Certificate credentials (Microsoft Entra ID): each client assertion names its certificate.

Entra ID finds the key by the certificate's thumbprint in the JWT header (x5t, and
x5t#S256), not by a kid; a certificate that is not the key's stops the daemon's start.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from signin_broker.daemon.client_credentials import load_credentials
from signin_broker.daemon.settings import SettingsError, load
from signin_broker.oidc.client_auth import ClientAuth, ClientAuthError
from signin_broker.oidc.metadata import ProviderMetadata


def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate_of(private: rsa.RSAPrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signin-broker test")])
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(private, hashes.SHA256())
    )


def files(tmp_path: Path, private: Any, certificate: x509.Certificate) -> tuple[Path, Path]:
    key_file, cert_file = tmp_path / "client.key", tmp_path / "client.crt"
    key_file.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_file.chmod(0o600)
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key_file, cert_file


def b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_each_assertion_carries_the_thumbprints_of_the_keys_certificate(tmp_path: Path) -> None:
    private = key()
    certificate = certificate_of(private)
    key_file, cert_file = files(tmp_path, private, certificate)
    credentials = load_credentials(
        "app",
        "private_key_jwt",
        private_key_file=key_file,
        certificate_file=cert_file,
        keyring=None,
    )
    auth = ClientAuth("app", "private_key_jwt", credentials)
    metadata = ProviderMetadata(
        issuer="https://login.example/t/v2.0",
        authorization_endpoint="https://login.example/authorize",
        token_endpoint="https://login.example/token",
        jwks_uri="https://login.example/keys",
        token_endpoint_auth_methods=("private_key_jwt",),
    )
    form, _, method = auth.sign("grant_type=refresh_token", metadata)
    assert method == "private_key_jwt"
    assertion = parse_qs(form)["client_assertion"][0]
    header = jwt.get_unverified_header(assertion)
    der = certificate.public_bytes(serialization.Encoding.DER)
    assert header["x5t"] == b64(hashlib.sha1(der).digest())
    assert header["x5t#S256"] == b64(hashlib.sha256(der).digest())
    jwt.decode(
        assertion, private.public_key(), algorithms=["RS256"], audience=metadata.token_endpoint
    )


def test_a_certificate_of_another_key_is_refused(tmp_path: Path) -> None:
    key_file, cert_file = files(tmp_path, key(), certificate_of(key()))
    with pytest.raises(ClientAuthError, match="is not the certificate of client_private_key"):
        load_credentials(
            "app",
            "private_key_jwt",
            private_key_file=key_file,
            certificate_file=cert_file,
            keyring=None,
        )
    with pytest.raises(SettingsError, match="is not the certificate of client_private_key"):
        load(
            [
                "--client-auth=private_key_jwt",
                f"--client-private-key-file={key_file}",
                f"--client-certificate-file={cert_file}",
            ],
            environ={},
        )


def test_a_file_that_is_no_certificate_is_refused(tmp_path: Path) -> None:
    key_file, cert_file = files(tmp_path, key(), certificate_of(key()))
    cert_file.write_text("not a certificate\n")
    with pytest.raises(SettingsError, match="is not a PEM certificate"):
        load(
            [
                "--client-auth=private_key_jwt",
                f"--client-private-key-file={key_file}",
                f"--client-certificate-file={cert_file}",
            ],
            environ={},
        )
