"""What a provider answers to the token and device endpoints, checked and bounded, and read back.

Whatever is accepted must be storable and usable: every token printable ASCII of at
most MAX_TOKEN_CHARS (a provider that packs a person's groups into its tokens can make
them a megabyte; the state file and both transports take that), a stated lifetime of
at most a day. A success answer that cannot be used is AnswerUnusable: the provider
did act on it, so a refresh token it rotated to is kept.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ..json_depth import within_depth
from .errors import AnswerUnusable, ProviderUnavailable
from .metadata import is_acceptable_url

log = logging.getLogger(__name__)

DEFAULT_EXPIRES_IN_SECONDS = 3600
MAX_TOKEN_CHARS = 2 * 1024 * 1024
# An answer is read whole up to this (an access token, an ID token and a refresh token
# of the largest size, and room), so the refresh token beside an oversized access token
# is still kept.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_TOKEN_LIFETIME_SECONDS = 24 * 3600  # a longer stated lifetime is taken as a day
DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"

# The token types accepted, by their lower-case name: how each is presented (RFC 6750; 9449).
TOKEN_TYPES = {"bearer": "Bearer", "dpop": "DPoP"}


@dataclass(frozen=True, slots=True)
class DeviceAuthorization:
    """The provider's answer to a device authorization request (RFC 8628 3.2)."""

    device_code: str = field(repr=False)
    user_code: str
    verification_uri: str
    verification_uri_complete: str
    expires_in: int
    interval: int

    @classmethod
    def from_json(cls, body: object) -> DeviceAuthorization:
        """Check the answer; ProviderUnavailable when it is not a usable one."""
        if not isinstance(body, dict):
            raise ProviderUnavailable("the device authorization answer is not a JSON object")
        texts = {}
        for name in ("device_code", "user_code", "verification_uri"):
            value = body.get(name)
            if not isinstance(value, str) or not value or len(value) > 2048:
                raise ProviderUnavailable(f"the device authorization answer has no usable {name}")
            texts[name] = value
        if not is_acceptable_url(texts["verification_uri"]):
            raise ProviderUnavailable("the device verification address is not https")
        complete = body.get("verification_uri_complete")
        if not isinstance(complete, str) or not is_acceptable_url(complete):
            complete = ""
        expires_in, interval = body.get("expires_in"), body.get("interval", 5)
        if not isinstance(expires_in, int) or not isinstance(interval, int) or expires_in <= 0:
            raise ProviderUnavailable("the device authorization answer has no usable expires_in")
        return cls(
            verification_uri_complete=complete,
            expires_in=expires_in,
            interval=max(interval, 1),
            **texts,
        )


@dataclass(frozen=True, slots=True)
class TokenResponse:
    """A successful token endpoint answer (RFC 6749 section 5.1)."""

    access_token: str = field(repr=False)
    token_type: str
    expires_in: int
    refresh_token: str | None = field(repr=False)
    id_token: str | None = field(repr=False)
    scope: tuple[str, ...] | None  # None when the provider did not say
    # It stated a lifetime above a day, taken as a day: a renewal assumes the lifetime
    # its tokens had before (TokenSet.renewed) rather than believe it.
    lifetime_unsure: bool = False
    # When it was asked for (time.monotonic()): its lifetime counts from then, as the
    # provider's does, not from whatever the sign-in did after (its id_token, userinfo).
    sent_at: float = field(default_factory=time.monotonic, compare=False)

    def age(self) -> float:
        """Seconds since it was asked for."""
        return max(0.0, time.monotonic() - self.sent_at)

    @classmethod
    def from_json(cls, body: object) -> TokenResponse:
        """Check a token response; AnswerUnusable (with any usable refresh token) if it is not.

        Every token must be printable ASCII of at most MAX_TOKEN_CHARS (so whatever is
        accepted can be stored and handed to apps as a header), and expires_in a
        positive number; a lifetime above MAX_TOKEN_LIFETIME_SECONDS is taken as that,
        or as the lifetime tokens had before (`lifetime_unsure`), and re-validation
        finds out sooner if the token dies sooner.
        """
        if not isinstance(body, dict):
            raise AnswerUnusable("the token response is not a JSON object")
        refresh_token = _token(body, "refresh_token")  # unusable: nothing can be kept
        try:
            access_token, stated, id_token, token_type = _usable_access(body)
        except AnswerUnusable as error:  # the refresh token it rotated to is kept
            raise AnswerUnusable(str(error), refresh_token) from None
        scope = body.get("scope")
        if stated > MAX_TOKEN_LIFETIME_SECONDS:
            log.warning(
                "the provider states a token lifetime above a day; it is not believed",
                extra={"expires_in": stated},
            )
        return cls(
            access_token=access_token,
            token_type=token_type,
            expires_in=min(stated, MAX_TOKEN_LIFETIME_SECONDS),
            lifetime_unsure=stated > MAX_TOKEN_LIFETIME_SECONDS,
            refresh_token=refresh_token,
            id_token=id_token,
            scope=tuple(scope.split()) if isinstance(scope, str) else None,
        )


def _usable_access(body: dict[str, Any]) -> tuple[str, int, str | None, str]:
    """The access token, its lifetime, the id_token and the token type (Bearer or DPoP)."""
    access_token = _token(body, "access_token")
    if access_token is None:
        raise AnswerUnusable("the token response has no access_token")
    token_type = body.get("token_type")
    spelt = TOKEN_TYPES.get(token_type.lower()) if isinstance(token_type, str) else None
    if spelt is None:
        raise AnswerUnusable(f"the token response has token_type {token_type!r:.40}")
    expires_in = _lifetime(body.get("expires_in", DEFAULT_EXPIRES_IN_SECONDS))
    return access_token, expires_in, _token(body, "id_token"), spelt


def _token(body: dict[str, Any], name: str) -> str | None:
    """A token of the answer; None when absent; AnswerUnusable when not usable as one."""
    value = body.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not (value.isascii() and value.isprintable()):
        raise AnswerUnusable(f"the token response's {name} is not printable text")
    if len(value) > MAX_TOKEN_CHARS:
        raise AnswerUnusable(f"the token response's {name} is over {MAX_TOKEN_CHARS} characters")
    return value


def _lifetime(expires_in: object) -> int:
    """expires_in as seconds (a string of digits is accepted)."""
    if isinstance(expires_in, str) and expires_in.isdigit() and len(expires_in) < 20:
        expires_in = int(expires_in)
    if not isinstance(expires_in, int) or isinstance(expires_in, bool) or expires_in <= 0:
        raise AnswerUnusable(f"the token response has an unusable expires_in ({expires_in!r:.40})")
    return expires_in


def id_token_expiry(id_token: str) -> int:
    """The `exp` of an ID token validated when it was received (0 when it says none).

    Read back from the token's payload without checking its signature again: it was
    checked on arrival (id_tokens.py), and only its expiry is wanted here.
    """
    parts = id_token.split(".")
    if len(parts) != 3:
        return 0
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(within_depth(payload))
    except (binascii.Error, ValueError):
        return 0
    expires = claims.get("exp") if isinstance(claims, dict) else None
    return int(expires) if isinstance(expires, int | float) and not isinstance(expires, bool) else 0
