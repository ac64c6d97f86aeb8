"""The session's exceptions: what a caller may be told (each maps onto a gRPC status).

Their messages are safe to show. How a provider failed a request is the protocol's
business: signin_broker.oidc.errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from .schedule import steady_min_ttl


class SessionError(Exception):
    """Base of the errors a caller may see; the message is safe to show (no secrets)."""


class SignInRequired(SessionError):
    """The account has no session: the user must sign in; `reason` says why it ended."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(f"sign-in required: {reason}" if reason else "sign-in required")


class AccountNotFound(SessionError):
    """The account does not exist, or the caller may not use it: deliberately the same."""

    def __init__(self) -> None:
        super().__init__("not found")


class AmbiguousAccount(SessionError):
    """A name (an e-mail, a login) fits several accounts the caller may see; it lists their ids.

    Only accounts the caller may see are ever candidates, so the list names no other.
    """

    def __init__(self, name: str, ids: list[str]) -> None:
        super().__init__(
            f"{name!r} names {len(ids)} accounts: {', '.join(ids)}; name one by its id,"
            " or give it an alias (signin-broker accounts alias NAME ID)"
        )


class UnknownAlias(SessionError):
    """The person named an alias to remove that no account has."""

    def __init__(self, alias: str) -> None:
        super().__init__(f"there is no alias {alias!r} (see signin-broker accounts)")


class AliasHidesLogin(SessionError):
    """The alias is the login of other signed-in accounts, which it would hide."""

    def __init__(self, alias: str, account: str, hidden: list[str]) -> None:
        super().__init__(
            f"{alias!r} is the login of {', '.join(hidden)}; as an alias of {account} it would"
            f" name {account} wherever {alias!r} names an account, hiding that login; choose"
            " another alias, or force it (signin-broker accounts alias --force)"
        )


class AliasConflict(SessionError):
    """An alias is also the login of other signed-in accounts that the person did not let it hide.

    They signed in after the alias was given (over a login, an alias needs --force): the
    name is refused until the person chooses, and status names the conflict.
    """

    def __init__(self, alias: str, account: str, hidden: list[str]) -> None:
        super().__init__(
            f"{alias!r} is your alias of {account} and the login of {', '.join(hidden)}, signed"
            f" in since the alias was given; name the account by its id, remove the alias"
            f" (signin-broker accounts alias --remove {alias}), or keep it over that login"
            f" (signin-broker accounts alias --force {alias} {account})"
        )
        self.alias, self.account, self.hidden = alias, account, tuple(hidden)


class TooManyAliases(SessionError):
    """The person has given the most aliases there may be."""


class AliasNotSaved(SessionError):
    """An alias change could not be written to the state folder, so it was not made."""

    def __init__(self, error: OSError) -> None:
        super().__init__(
            f"the alias could not be saved ({error.strerror or error}), so nothing changed;"
            " free space in the state folder or make it writable"
        )


class NotConfigured(SessionError):
    """The daemon lacks a setting that this request needs."""


class ScopesNotAllowed(SessionError):
    """The user's app policy limits the caller to fewer scopes than it asks for."""

    def __init__(self, allowed: frozenset[str]) -> None:
        super().__init__(
            f"the user's app policy limits this app to the scopes {' '.join(sorted(allowed))}"
        )


class AudienceNotAllowed(SessionError):
    """The caller is limited to tokens of one audience (a forward's) and asked for another."""

    def __init__(self, allowed: str) -> None:
        super().__init__(f"this app may get tokens for the audience {allowed} only")


class IdTokenNotAllowed(SessionError):
    """The caller asked for the ID token, which its app rule does not allow."""

    def __init__(self, app: str) -> None:
        how = f"`signin-broker apps allow {app} --id-token`"
        if app.startswith("forward:"):  # a forward's policy is fixed when it is opened
            how = f"a forward opened with --id-token (signin-broker forward --name {app[8:]} ...)"
        super().__init__(f"this app may not have the ID token; the user can allow it with {how}")


class IdTokenUnavailable(SessionError):
    """The session has no ID token that is still valid (the provider did not renew it)."""


class InvalidSignIn(SessionError):
    """A sign-in asked for something that cannot go together (e.g. device and redirect_to)."""


class RetryLater(SessionError):
    """A refusal that passes: `retry_after` is when to ask again (seconds, at least 1).

    Apps are told it beside the status: a `retry-after` trailer on gRPC, HTTP's
    Retry-After header on the JSON calls.
    """

    def __init__(self, message: str, retry_after: float) -> None:
        self.retry_after = max(1, round(retry_after))
        super().__init__(f"{message}; try again in {self.retry_after} s")


class ProviderUnreachable(RetryLater):
    """The provider did not renew a token that no longer serves the caller; it may later."""

    def __init__(self, reason: str, retry_after: float = 1.0) -> None:
        super().__init__(f"the identity provider is unavailable ({reason})", retry_after)


class ProviderDoesNotFit(SessionError):
    """The provider does not fit the settings: no sign-in until one is mended (it says which)."""


class StorageWaits(RetryLater):
    """The account's state cannot be written, so its refresh token is not spent (renewal waits).

    Spending it with nowhere to keep its successor would leave a spent one on disk,
    which a restart would send again: a provider that rotates them ends the session then.
    """

    def __init__(self, account: str, reason: str, retry_after: float) -> None:
        super().__init__(
            f"the token of {account} cannot be renewed while its state cannot be saved"
            f" ({reason}); it is renewed as soon as the state folder can be written (free"
            " space there, or make it writable)",
            retry_after,
        )


class ScopeNotGranted(SessionError):
    """A caller asked for a scope the account was never granted: no up-scoping.

    The advice depends on why: a scope the daemon does not ask for at sign-in goes into
    its `scopes` setting; one it asks for and the provider left out is the provider's
    to grant, and the message says what it granted instead.
    """

    def __init__(
        self, missing: list[str], account: str, granted: Sequence[str], asked: Sequence[str]
    ) -> None:
        not_asked = [scope for scope in missing if scope not in asked]
        said = f"scope {' '.join(missing)} was not granted to {account} at sign-in"
        if not_asked:
            advice = f"; add {' '.join(not_asked)} to the daemon's scopes setting and sign in again"
        else:
            advice = (
                f": the daemon asks for it, and the provider granted only"
                f" {' '.join(granted) or 'no scope'}; which scopes this client may have is"
                " the provider's setting"
            )
        super().__init__(said + advice)


class ProviderRefused(SessionError):
    """The provider refused a refresh, not ending the session (invalid_scope, invalid_target, ...).

    `error` is its OAuth error code, `status` its HTTP status, `description` what it said.
    """

    def __init__(self, error: str, status: int = 400, description: str = "") -> None:
        super().__init__(f"the identity provider refused that token ({error})")
        self.error = error
        self.status = status
        self.description = description


class NoPerson(NotConfigured):
    """A service account (the client credentials grant) was asked for what needs a person.

    A sign-in, a step-up, an ID token, a sign-out: there is nobody to sign in, and its
    tokens come from the client's own credentials.
    """

    def __init__(self, who: str, what: str) -> None:
        super().__init__(
            f"{who} is a service account (grant = client_credentials), with no person: {what}"
        )


class TokenTooShortLived(SessionError):
    """The token cannot be renewed and will not last as long as the caller asked."""

    def __init__(self, seconds_left: int) -> None:
        super().__init__(
            f"the access token lasts {seconds_left} s more and cannot be renewed;"
            " ask for a shorter min_ttl_seconds or sign in again"
        )


class TokenLifetimeTooShort(SessionError):
    """The caller asks for a token to last (nearly) as long as the provider's tokens do.

    Serving a min_ttl close to the lifetime would renew them every few seconds.
    """

    def __init__(self, lifetime: float, min_ttl: int) -> None:
        if min_ttl >= lifetime:
            why = f"min_ttl_seconds {min_ttl} cannot be met"
        else:  # see TokenSet.renewal_would_hammer
            why = (
                f"min_ttl_seconds {min_ttl} would renew them every few seconds; ask for at"
                f" most {int(steady_min_ttl(lifetime))} s"
            )
        super().__init__(f"the provider issues tokens valid for {round(lifetime)} s; {why}")


class TooManyNewTokens(RetryLater):
    """The app asked for more new down-scoped tokens than its budget allows (session.limits)."""

    def __init__(self, wait_seconds: int) -> None:
        super().__init__("too many new token audiences or scope sets from this app", wait_seconds)
        self.wait_seconds = self.retry_after


class StepUpRequired(SessionError):
    """The account's sign-in does not meet a request's step-up, and no sign-in that does came."""

    def __init__(self, account: str, asked: str, why: str) -> None:
        super().__init__(
            f"step-up sign-in required: {asked} for {account}; {why}"
            " (sign in with `signin-broker login`, then ask again)"
        )


class AcrNotOffered(SessionError):
    """A step-up asked for acr values its provider does not list (acr_values_supported)."""

    def __init__(self, unlisted: list[str], supported: tuple[str, ...]) -> None:
        shown = ", ".join(repr(v if len(v) <= 40 else v[:40] + "...") for v in unlisted)
        offered = ", ".join(supported) or "none"
        super().__init__(
            f"acr_values {shown} are not offered by the identity provider (its"
            f" acr_values_supported: {offered})"
        )


class SignInNotTaken(InvalidSignIn):
    """A sign-in ended as another account than it must, or short of its step-up: not taken.

    `error_code` names which, as the sign-in's failure does (step_up_refused, wrong_account).
    """

    def __init__(self, reason: str, error_code: str) -> None:
        super().__init__(reason)
        self.error_code = error_code
