"""How the daemon proves which client it is to the provider: by name, by secret, or by signed JWT.

A public client (`none`) only names itself; a confidential one authenticates every
request to the token endpoint, and to the revocation and device authorization
endpoints, which take the same credentials: with its secret in an HTTP Basic header
(`client_secret_basic`, RFC 6749 2.3.1) or in the form (`client_secret_post`), or with
a short-lived JWT signed by its private key (`private_key_jwt`, OpenID Connect Core 9
and RFC 7523). With `auto`, what is configured decides, and the provider's
`token_endpoint_auth_methods_supported` picks between Basic and the form.

The secret comes from the OS keyring (`client:<client_id>:secret`, stored with
`signin-broker client-secret set`) or from a file; the private key from a PEM file.
Such a file must be a regular file of the user's that nobody else can read. No secret
is ever put in argv, the environment, a log line or an error message, and the objects
holding one do not show it in their repr.
"""

from __future__ import annotations

import base64
import errno
import logging
import os
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode

from .errors import OAuthError

if TYPE_CHECKING:  # PyJWT and cryptography load when a key is used: the settings import this
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    from ..store.keys import KeyStore
    from .oidc import ProviderMetadata

    PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

log = logging.getLogger(__name__)

NONE = "none"
SECRET_BASIC = "client_secret_basic"  # noqa: S105 - a method's name
SECRET_POST = "client_secret_post"  # noqa: S105 - a method's name
PRIVATE_KEY_JWT = "private_key_jwt"
METHODS = (NONE, SECRET_BASIC, SECRET_POST, PRIVATE_KEY_JWT)
AUTO = "auto"
CHOICES = (AUTO, *METHODS)
ASSERTION_AUDIENCES = ("token_endpoint", "issuer")
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_SECONDS = 60  # long enough for a slow request, short enough to be useless later
MAX_FILE_BYTES = 64 * 1024  # a secret or a PEM key is far smaller
MIN_RSA_BITS = 2048
# The signing algorithms each kind of key can use, the most widely accepted first.
RSA_ALGORITHMS = ("RS256", "PS256", "RS384", "PS384", "RS512", "PS512")
EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
FORM_CREDENTIALS = ("client_id", "client_secret", "client_assertion", "client_assertion_type")


class ClientAuthError(Exception):
    """A client credential cannot be used; the message says which and what to do, not the secret."""


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


def signing_algorithms(key: PrivateKey) -> tuple[str, ...]:
    """The JWS algorithms this key can sign with, the most widely accepted first."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return (EC_ALGORITHMS[key.curve.name],)
    return ("EdDSA",)


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """What the client can prove itself with, and where each came from (for the log)."""

    secret: str | None = field(default=None, repr=False)
    secret_source: str = ""
    private_key: PrivateKey | None = field(default=None, repr=False)
    key_id: str = ""
    certificate: dict[str, str] = field(default_factory=dict)  # x5t, x5t#S256


def load_client_auth(
    client_id: str,
    setting: str,
    *,
    secret_file: Path | None,
    private_key_file: Path | None,
    key_id: str,
    assertion_audience: str,
    keyring: Callable[[], KeyStore] | None,
    provider: str = "",
    certificate_file: Path | None = None,
) -> ClientAuth:
    """The client's authentication as configured; one that refuses every request if it cannot work.

    Blocking (files, the keyring): call it from a worker thread. When a credential the
    setting needs cannot be read, the reason is logged now and every request fails as
    invalid_client with it: nothing is sent unauthenticated in its place.
    """
    try:
        credentials = load_credentials(
            client_id,
            setting,
            secret_file=secret_file,
            private_key_file=private_key_file,
            key_id=key_id,
            keyring=keyring,
            provider=provider,
            certificate_file=certificate_file,
        )
    except ClientAuthError as error:
        log.error("client authentication cannot work", extra={"reason": str(error)})  # noqa: TRY400 - no traceback
        return ClientAuth(client_id, setting, problem=str(error))
    return ClientAuth(client_id, setting, credentials, assertion_audience=assertion_audience)


def load_credentials(
    client_id: str,
    setting: str,
    *,
    secret_file: Path | None = None,
    private_key_file: Path | None = None,
    key_id: str = "",
    keyring: Callable[[], KeyStore] | None,
    provider: str = "",
    certificate_file: Path | None = None,
) -> ClientCredentials:
    """Read the credentials `setting` may use; ClientAuthError when a needed one is missing.

    The keyring (None: the user chose to keep keys out of it) is asked only when a
    secret may be used and no secret file is named; with `auto`, a keyring that cannot
    be used means a public client, as no secret can have been stored there either.
    """
    private_key = read_private_key(private_key_file) if private_key_file is not None else None
    secret, source = None, ""
    if secret_file is not None:
        secret, source = read_secret_file(secret_file), f"file {secret_file}"
    elif setting in (SECRET_BASIC, SECRET_POST) or (setting == AUTO and private_key is None):
        secret = _keyring_secret(secret_name(client_id, provider), setting, keyring)
        source = "keyring" if secret is not None else ""
    if setting in (SECRET_BASIC, SECRET_POST) and secret is None:
        raise ClientAuthError(
            f"client_auth = {setting} needs the client secret: store it with"
            f" `signin-broker client-secret set --client-id {client_id}"
            f"{f' --provider {provider}' if provider else ''}`, or name a 0600"
            " file with client_secret_file"
        )
    if setting == PRIVATE_KEY_JWT and private_key is None:
        raise ClientAuthError(
            "client_auth = private_key_jwt needs client_private_key_file (a 0600 PEM file)"
        )
    certificate = (
        certificate_headers(certificate_file, private_key) if certificate_file is not None else {}
    )
    return ClientCredentials(secret, source, private_key, key_id, certificate)


def _keyring_secret(name: str, setting: str, keyring: Callable[[], KeyStore] | None) -> str | None:
    """The secret the keyring holds under name, if any (ClientAuthError: it is needed)."""
    from ..store.keys import KeyStoreUnavailable

    try:
        if keyring is None:
            raise KeyStoreUnavailable("key_store is file: the keyring is not used")  # noqa: TRY301 - one handler for both
        stored = keyring().get(name)
    except KeyStoreUnavailable as error:
        if setting != AUTO:
            raise ClientAuthError(
                f"client_auth = {setting} needs the client secret, and the keyring cannot"
                f" be used ({error}); name a 0600 file with client_secret_file instead"
            ) from None
        log.debug("no keyring to hold a client secret", extra={"reason": str(error)})
        return None
    if stored is None:
        return None
    try:
        return check_secret(stored.decode())
    except (UnicodeDecodeError, ClientAuthError):
        raise ClientAuthError(
            f"the keyring's {name} is not a usable secret; store it"
            " again with `signin-broker client-secret set`"
        ) from None


class ClientAuth:
    """A client's way to authenticate and its credentials; adds them to each form it sends.

    `problem`, when set, is why the configured credentials cannot be used: every
    request then fails as invalid_client with it, instead of going out unauthenticated.
    """

    def __init__(
        self,
        client_id: str,
        setting: str = AUTO,
        credentials: ClientCredentials | None = None,
        *,
        assertion_audience: str = "token_endpoint",
        problem: str = "",
    ) -> None:
        self.client_id = client_id
        self.setting = setting
        self._credentials = credentials or ClientCredentials()
        self._assertion_audience = assertion_audience
        self._problem = problem
        self._announced = ""  # the method last logged

    def method(self, advertised: Sequence[str]) -> str:
        """The method to use with a provider that lists `advertised`.

        With `auto`: a private key signs, unless the provider does not list
        private_key_jwt and there is a secret too; a secret goes in a Basic header,
        or in the form where the provider lists only that; nothing means a public client.
        """
        if self.setting != AUTO:
            return self.setting
        secret, private_key = self._credentials.secret, self._credentials.private_key
        if private_key is not None and (PRIVATE_KEY_JWT in advertised or secret is None):
            return PRIVATE_KEY_JWT
        if secret is None:
            return NONE
        if SECRET_POST in advertised and SECRET_BASIC not in advertised:
            return SECRET_POST
        return SECRET_BASIC

    def sign(self, body: str, metadata: ProviderMetadata) -> tuple[str, dict[str, str], str]:
        """The form with this client's credentials, the headers to add, and the method used.

        Any client credential already in the form is replaced. OAuthError
        (invalid_client) when the configured credentials could not be loaded.
        """
        if self._problem:
            raise OAuthError("invalid_client", self._problem, 0)
        method = self.method(metadata.token_endpoint_auth_methods)
        if method != self._announced:
            self._announced = method
            log.info("client authentication", extra=self._describe(method, metadata))
        fields = [
            pair
            for pair in parse_qsl(body, keep_blank_values=True)
            if pair[0] not in FORM_CREDENTIALS
        ]
        headers: dict[str, str] = {}
        if method == SECRET_BASIC:
            # RFC 6749 2.3.1: each part form-encoded first; %20 for a space suits every decoder.
            pair = f"{quote(self.client_id, safe='')}:{quote(self._secret(), safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            fields.append(("client_id", self.client_id))
        if method == SECRET_POST:
            fields.append(("client_secret", self._secret()))
        elif method == PRIVATE_KEY_JWT:
            fields += [
                ("client_assertion_type", ASSERTION_TYPE),
                ("client_assertion", self._assertion(metadata)),
            ]
        return urlencode(fields), headers, method

    def refused(self, method: str, endpoint: str, metadata: ProviderMetadata) -> None:
        """Log that the provider refused this client's credentials, with what may help."""
        log.error(
            "the provider refused the client's credentials",
            extra={
                "error_code": "invalid_client",
                "endpoint": endpoint,
                **self._describe(method, metadata),
                "hint": "check client_id, client_auth, and the secret or key registered there",
            },
        )

    def _secret(self) -> str:
        if self._credentials.secret is None:
            raise OAuthError("invalid_client", "no client secret is configured", 0)
        return self._credentials.secret

    def _assertion(self, metadata: ProviderMetadata) -> str:
        """A JWT that only this client could sign, for one request (RFC 7523 3)."""
        import jwt

        key = self._credentials.private_key
        if key is None:
            raise OAuthError("invalid_client", "no private key is configured", 0)
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self._audience(metadata),
            "jti": secrets.token_urlsafe(24),
            "iat": now,
            "exp": now + ASSERTION_SECONDS,
        }
        headers = dict(self._credentials.certificate)
        if self._credentials.key_id:
            headers["kid"] = self._credentials.key_id
        return jwt.encode(claims, key, algorithm=_algorithm(key, metadata), headers=headers or None)

    def _audience(self, metadata: ProviderMetadata) -> str:
        """The token endpoint (OpenID Connect Core 9), or the issuer if the provider asks for it."""
        if self._assertion_audience == "issuer":
            return metadata.issuer
        return metadata.token_endpoint

    def _describe(self, method: str, metadata: ProviderMetadata) -> dict[str, str]:
        """What the log may say about how this client authenticates: never a secret."""
        described = {"client_id": self.client_id, "client_auth": method, "setting": self.setting}
        if method in (SECRET_BASIC, SECRET_POST):
            described["secret_from"] = self._credentials.secret_source
        key = self._credentials.private_key
        if method == PRIVATE_KEY_JWT and key is not None:
            described["algorithm"] = _algorithm(key, metadata)
            described["audience"] = self._audience(metadata)
            if self._credentials.certificate:
                described["x5t#S256"] = self._credentials.certificate["x5t#S256"]
        return described


def _algorithm(key: PrivateKey, metadata: ProviderMetadata) -> str:
    """The key's first algorithm the provider lists, or its first if the provider says nothing."""
    usable = signing_algorithms(key)
    listed = metadata.token_endpoint_auth_signing_algorithms
    return next((name for name in usable if name in listed), usable[0])
