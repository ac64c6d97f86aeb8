"""How the broker proves which client it is to the provider: by name, by secret, or by signed JWT.

A public client (`none`) only names itself; a confidential one authenticates every
request to the token endpoint, and to the revocation and device authorization
endpoints, which take the same credentials: with its secret in an HTTP Basic header
(`client_secret_basic`, RFC 6749 2.3.1) or in the form (`client_secret_post`), or with
a short-lived JWT signed by its private key (`private_key_jwt`, OpenID Connect Core 9
and RFC 7523). With `auto`, what is configured decides, and the provider's
`token_endpoint_auth_methods_supported` picks between Basic and the form; a provider
that refuses a secret in a Basic header, where the secret had to be encoded for it
(RFC 6749 2.3.1; LemonLDAP::NG does not decode), gets it in the form from then on, if
it lists that. Where the credentials come from is credentials.py; the objects holding
one never show it.
"""

from __future__ import annotations

import base64
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode

from .errors import OAuthError
from .jose import eddsa_by_its_old_name, signing_algorithms, signing_key

if TYPE_CHECKING:
    from .jose import PrivateKey
    from .metadata import ProviderMetadata

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
FORM_CREDENTIALS = ("client_id", "client_secret", "client_assertion", "client_assertion_type")


class ClientAuthError(Exception):
    """A client credential cannot be used; the message says which and what to do, not the secret."""


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """What the client can prove itself with, and where each came from (for the log)."""

    secret: str | None = field(default=None, repr=False)
    secret_source: str = ""
    private_key: PrivateKey | None = field(default=None, repr=False)
    key_id: str = ""
    certificate: dict[str, str] = field(default_factory=dict)  # x5t, x5t#S256


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
        self._basic_refused = False  # auto: Basic was refused, the form taken instead

    @property
    def confidential(self) -> bool:
        """Whether it has credentials to authenticate with (or is set to, and they failed)."""
        if self.setting == NONE:
            return False
        credentials = self._credentials
        return bool(self._problem or credentials.secret or credentials.private_key)

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
        if SECRET_POST in advertised and (self._basic_refused or SECRET_BASIC not in advertised):
            return SECRET_POST
        return SECRET_BASIC

    def form_instead(self, refused: str, metadata: ProviderMetadata) -> bool:
        """Whether a refusal of `refused` is worth one more try with the secret in the form.

        Only with `auto`, after Basic, for a secret that Basic had to encode, at a
        provider that lists client_secret_post: a wrong secret is not sent twice.
        """
        secret = self._credentials.secret
        if (
            self.setting != AUTO
            or refused != SECRET_BASIC
            or secret is None
            or quote(secret, safe="") == secret
            or SECRET_POST not in metadata.token_endpoint_auth_methods
        ):
            return False
        self._basic_refused = True
        log.warning(
            "the provider refused the client secret in a Basic header; trying it in the form",
            extra={"client_id": self.client_id, "hint": "some providers do not decode Basic"},
        )
        return True

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
        from joserfc import jwt

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
        algorithm = _algorithm(key, metadata)
        header = {"alg": algorithm, "typ": "JWT", **self._credentials.certificate}
        if self._credentials.key_id:
            header["kid"] = self._credentials.key_id
        with eddsa_by_its_old_name():
            return jwt.encode(header, claims, signing_key(key), algorithms=[algorithm])

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
