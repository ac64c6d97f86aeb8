"""How a provider fails a request, and what each failure makes of a sign-in.

A refusal and an answer that is no use are kept apart because a session treats them
differently: a refusal (OAuthError, e.g. invalid_grant) is the provider's decision;
not answering properly (ProviderUnavailable: network, timeout, 5xx, garbage) is tried
again later, and an answer that may have been lost (AnswerLost) leaves a rotated
refresh token in doubt. failure_reason() says why a request got no answer, in words
that carry none of it.

A sign-in, the browser's callback and the device grant alike, fails in a few ways:
the provider refused the code or the client, its answer did not validate, this
device's clock is off, it answers in a way the settings cannot use, or it could not
be reached. failure_of() makes each one error_code (the contract's, docs/contract.md
§15), a reason for the log and the app that waits, and a sentence for the person;
none holds a secret.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

# How far down an exception's causes to look for the OS's or TLS's own reason.
MAX_CAUSES = 8


class ProviderUnavailable(Exception):
    """The provider did not answer usefully (network, timeout, 5xx, malformed); try later."""


class ProviderMisfit(ProviderUnavailable):
    """The provider answers, but not as these settings or this broker can use.

    Its discovery document names the issuer otherwise (a trailing slash), lacks PKCE
    with S256, an endpoint or a signing algorithm. Sessions wait it out like any outage
    (the provider may be mid-change), but a person must hear exactly what does not fit:
    trying again alone will not mend it.
    """


class AnswerLost(ProviderUnavailable):
    """The request may have reached the provider, but no answer came back.

    A timeout or a dropped connection after sending, or a gateway's 504: the provider
    may have acted on it (a refresh token spent) or not.
    """


class AnswerUnusable(AnswerLost):
    """The provider answered with success, but the answer cannot be used as it is.

    Not JSON, too large, or its fields missing or out of bounds: the provider did act
    on the request (a refresh token rotated). `refresh_token` is the new one when the
    answer still names one usably, so that a rotation is not lost with the rest.
    """

    def __init__(self, reason: str, refresh_token: str | None = None) -> None:
        super().__init__(reason)
        self.refresh_token = refresh_token


class OAuthError(Exception):
    """The provider refused a request with an OAuth error code such as invalid_grant."""

    def __init__(
        self, error: str, description: str, status: int, *, dpop_challenge: bool = False
    ) -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description
        self.status = status
        self.dpop_challenge = dpop_challenge  # the answer's WWW-Authenticate named DPoP


class DpopWanted(OAuthError):
    """A provider that offers DPoP refused a request without a proof, and `dpop` is off.

    Such a provider may require DPoP of this client (panva's oidc-provider answers a
    plain invalid_grant then), and the setting forbids sending a proof.
    """

    def __init__(self, refusal: OAuthError) -> None:
        super().__init__(
            refusal.error, refusal.description, refusal.status,
            dpop_challenge=refusal.dpop_challenge,
        )  # fmt: skip
        self.hint = (
            f"the identity provider refused a request without a DPoP proof ({refusal.error});"
            " it offers DPoP and may require it of this client, which its `dpop` setting,"
            ' off, forbids; remove dpop = "off" for it (or set dpop = "if-required"),'
            " restart the daemon and sign in again"
        )


class DpopSignInAgain(Exception):
    """The code was refused without a DPoP proof, then with one: the provider may have spent it.

    It may require DPoP of this client: the sign-in begins again, with a proof from the
    start (once).
    """


class IdTokenInvalid(Exception):
    """The id_token failed validation; the message says which check."""


class ClockSkewed(IdTokenInvalid):
    """The id_token is valid but for this device's clock, which is off by more than allowed."""


class DeviceGrantEnded(Exception):
    """The grant ended without tokens: RFC 8628's error_code, or invalid_code for another."""

    def __init__(self, error_code: str, reason: str) -> None:
        super().__init__(f"{error_code}: {reason}")
        self.error_code = error_code
        self.reason = reason


class NoDeviceGrant(Exception):
    """The provider offers no device sign-in: its discovery has no device_authorization_endpoint."""

    def __init__(self) -> None:
        super().__init__(
            "the identity provider offers no device sign-in (its discovery document has no"
            " device_authorization_endpoint); sign in with a browser instead"
        )


def failure_reason(error: BaseException) -> str:
    """Why a connection failed, in the OS's or TLS's words: no URL, header or body in it.

    httpx2 wraps httpcore2's error, which wraps the socket's or ssl's; their own text
    carries no request data. Without one of those, the exception's type alone.
    """
    cause: BaseException | None = error
    for _ in range(MAX_CAUSES):
        if cause is None:
            break
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"the provider's TLS certificate is not trusted ({cause.verify_message}):"
                " its CA must be among the system's CA certificates (or in SSL_CERT_FILE or"
                " SSL_CERT_DIR)"
            )
        if isinstance(cause, ssl.SSLError):
            return f"TLS failed ({cause.reason or type(cause).__name__})"
        if isinstance(cause, OSError) and cause.strerror:
            return f"{type(error).__name__} ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    return type(error).__name__


CLIENT_REFUSED = (
    "The identity provider did not accept this broker's client credentials. Check the"
    " client_id, client_auth and client secret or key settings against the registration"
    " there; the daemon's log says which method was used."
)


@dataclass(frozen=True, slots=True)
class SignInFailure:
    """One failed sign-in: the contract's error_code, the reason, and what the person reads."""

    error_code: str
    reason: str
    message: str

    def __str__(self) -> str:
        """As watchers and waiting apps are told: "<error_code>: <reason>"."""
        return f"{self.error_code}: {self.reason}"


def failure_of(error: Exception) -> SignInFailure:  # noqa: PLR0911 - one per kind
    """The failure a provider's error makes of a sign-in (token exchange or id_token)."""
    reason = str(error)
    if isinstance(error, DeviceGrantEnded):
        return SignInFailure(error.error_code, error.reason, _sentence(error.reason))
    if isinstance(error, DpopWanted):  # a setting stands in the way: say which
        return SignInFailure("invalid_code", error.hint, _sentence(error.hint))
    if isinstance(error, DpopSignInAgain):  # the sign-in begun again with DPoP failed too
        return SignInFailure("invalid_code", reason, _sentence(reason))
    if isinstance(error, OAuthError) and error.error == "invalid_client":
        return SignInFailure("invalid_client", CLIENT_REFUSED, CLIENT_REFUSED)
    if isinstance(error, OAuthError):
        return SignInFailure(
            "invalid_code",
            f"the identity provider did not accept the sign-in code ({error.error})",
            "The identity provider did not accept the sign-in code. Please sign in again.",
        )
    if isinstance(error, ClockSkewed):  # the person can fix this: say how
        return SignInFailure("clock_skew", reason, _sentence(reason))
    if isinstance(error, IdTokenInvalid):
        return SignInFailure(
            "invalid_id_token", reason, f"The identity provider's answer was not valid: {reason}."
        )
    if isinstance(error, ProviderMisfit):  # a setting to mend: say exactly what, everywhere
        return SignInFailure(
            "provider_misconfigured",
            f"the identity provider does not fit the settings ({reason})",
            f"The identity provider does not fit the broker's settings: {reason}.",
        )
    if isinstance(error, ProviderUnavailable):
        return SignInFailure(
            "provider_unavailable",
            f"the identity provider cannot be reached ({reason})",
            "The identity provider cannot be reached. Try again in a moment.",
        )
    raise TypeError(f"not a provider's error: {type(error).__name__}")


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}."
