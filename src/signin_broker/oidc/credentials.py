"""Reading a client's credentials from files: a secret, a PEM private key and its certificate.

Such a file must be a regular file of the user's that nobody else can read; no secret
is ever put in argv, the environment, a log line or an error message.
"""

from __future__ import annotations

import base64
import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from .client_auth import ClientAuthError
from .jose import EC_ALGORITHMS

if TYPE_CHECKING:
    from .jose import PrivateKey

MAX_FILE_BYTES = 64 * 1024  # a secret or a PEM key is far smaller
MIN_RSA_BITS = 2048


def secret_name(client_id: str, provider: str = "") -> str:
    """The key store name of a client's secret (at a provider other than the main one)."""
    return f"client:{provider}/{client_id}:secret" if provider else f"client:{client_id}:secret"


def read_private_file(path: Path, setting: str) -> bytes:
    """A credential file's bytes: only a regular file of the user's that only the user can read.

    A symlink, a FIFO or a device is refused (opening one neither follows nor blocks),
    and so is a file others could read, or one that belongs to someone else.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ClientAuthError(f"{setting}: {path} does not exist") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ClientAuthError(f"{setting}: {path} is a symlink; name the file itself") from None
        raise ClientAuthError(f"{setting}: {path} cannot be read: {error.strerror}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ClientAuthError(f"{setting}: {path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise ClientAuthError(
                f"{setting}: {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
            )
        if info.st_mode & 0o077:
            raise ClientAuthError(
                f"{setting}: other users can read or write {path} (mode"
                f" {stat.S_IMODE(info.st_mode):04o}); run `chmod 600 {path}`"
            )
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            data = file.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_FILE_BYTES:
        raise ClientAuthError(f"{setting}: {path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def read_secret_file(path: Path) -> str:
    """The client secret in a file: one line, a final newline allowed."""
    try:
        text = read_private_file(path, "client_secret_file").decode()
    except UnicodeDecodeError:
        raise ClientAuthError(f"client_secret_file: {path} is not UTF-8 text") from None
    return _one_line(text, f"client_secret_file: {path}")


def check_secret(text: str) -> str:
    """A secret as typed or piped in: one line, a final newline allowed."""
    return _one_line(text, "the client secret")


def _one_line(text: str, what: str) -> str:
    secret = text.removesuffix("\n").removesuffix("\r")
    if not secret.strip() or not secret.isprintable():
        raise ClientAuthError(f"{what} must hold the secret alone, on one line")
    return secret


def read_private_key(path: Path) -> PrivateKey:
    """The client's private key from an unencrypted PEM file: RSA (2048 bits up), EC or Ed25519."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    data = read_private_file(path, "client_private_key_file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise ClientAuthError(
            f"client_private_key_file: {path} is encrypted; keep it unencrypted, mode 0600"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise ClientAuthError(f"client_private_key_file: {path} is not a PEM private key") from None
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size < MIN_RSA_BITS:
        raise ClientAuthError(
            f"client_private_key_file: {path} is an RSA key of {key.key_size} bits;"
            f" at least {MIN_RSA_BITS} are needed"
        )
    if isinstance(key, rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey) or (
        isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in EC_ALGORITHMS
    ):
        return key
    raise ClientAuthError(
        f"client_private_key_file: {path} is a kind of key that cannot sign here;"
        " use RSA, EC (P-256, P-384, P-521) or Ed25519"
    )


def certificate_headers(path: Path, key: PrivateKey | None) -> dict[str, str]:
    """The x5t and x5t#S256 of the key's PEM certificate, for each assertion's header.

    Microsoft Entra ID finds a certificate credential by these thumbprints (RFC 7515
    4.1.7 and 4.1.8) rather than by a kid. The certificate must be the key's.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    if key is None:
        raise ClientAuthError("client_certificate_file needs client_private_key_file, its key")
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        certificate = x509.load_pem_x509_certificate(data[:MAX_FILE_BYTES])
    except OSError as error:
        raise ClientAuthError(f"client_certificate_file: {path}: {error.strerror}") from None
    except ValueError:
        raise ClientAuthError(f"client_certificate_file: {path} is not a PEM certificate") from None
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    if certificate.public_key().public_bytes(
        serialization.Encoding.DER, spki
    ) != key.public_key().public_bytes(serialization.Encoding.DER, spki):
        raise ClientAuthError(
            f"client_certificate_file: {path} is not the certificate of client_private_key_file"
        )
    der = certificate.public_bytes(serialization.Encoding.DER)

    def thumbprint(algorithm: hashes.HashAlgorithm) -> str:
        digest = hashes.Hash(algorithm)
        digest.update(der)
        return base64.urlsafe_b64encode(digest.finalize()).rstrip(b"=").decode()

    return {"x5t": thumbprint(hashes.SHA1()), "x5t#S256": thumbprint(hashes.SHA256())}  # noqa: S303 - a name, as RFC 7515 4.1.7 defines it
