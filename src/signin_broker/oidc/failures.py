"""Why a sign-in failed, named as the contract names it (section 6), for every flow alike.

The browser's callback and the device grant fail in the same few ways: the provider
refused the code or the client, its answer did not validate, this device's clock is
off, it answers in a way the settings cannot use, or it could not be reached. Each
becomes one error_code, a reason for the log and the app that waits, and a sentence
for the person; none holds a secret.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import (
    ClockSkewed,
    DeviceGrantEnded,
    DpopSignInAgain,
    DpopWanted,
    IdTokenInvalid,
    OAuthError,
    ProviderMisfit,
    ProviderUnavailable,
)

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
