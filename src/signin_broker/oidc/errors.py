"""How a provider failed a request: it refused it, or it did not answer usefully.

The two are kept apart because a session treats them differently: a refusal
(OAuthError, e.g. invalid_grant) is the provider's decision; not answering properly
(ProviderUnavailable: network, timeout, 5xx, garbage) is tried again later, and an
answer that may have been lost (AnswerLost) leaves a rotated refresh token in doubt.
failure_reason() says why a request got no answer, in words that carry none of it.
"""

from __future__ import annotations

import ssl

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

    def __init__(self, error: str, description: str, status: int) -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description
        self.status = status


class DpopWanted(OAuthError):
    """A provider that offers DPoP refused a request without a proof, and `dpop` is off.

    Such a provider may require DPoP of this client (panva's oidc-provider answers a
    plain invalid_grant then), and the setting forbids sending a proof.
    """

    def __init__(self, refusal: OAuthError) -> None:
        super().__init__(refusal.error, refusal.description, refusal.status)
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
