"""What a token request may ask of the sign-in behind the token (RFC 9470 step-up).

An API that needs a stronger or fresher sign-in says so in its 401 challenge with
`acr_values` (authentication context classes, matched exactly, as RFC 9470 section 3
says) and `max_age` (seconds since the person authenticated: the ID token's
`auth_time`). A StepUp is that requirement; it tells whether a sign-in meets it and
which authorize parameters ask the provider for one that does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import AcrNotOffered

# The provider's clock beside this device's: a sign-in made for a step-up that is this
# much older than its max_age still counts (max_age 0 asks for one after the request).
CLOCK_LEEWAY_SECONDS = 5


# How a step-up's acr values are told to the person when the provider does not list them
# (acr_values_supported): whatever an app sent is never shown as the daemon's own words.
UNLISTED_ACR = "an authentication context the identity provider does not list"


@dataclass(frozen=True, slots=True)
class StepUp:
    """The sign-in must have an acr among `acr_values` (if any) and be at most `max_age` old.

    `listed`: the provider lists those acr values, so they may be shown to the person;
    until then they are not (an app could write anything there).
    """

    acr_values: tuple[str, ...] = ()
    max_age: int | None = None
    listed: bool = False

    def offered_by(self, supported: tuple[str, ...] | None) -> StepUp:
        """The step-up, checked against the acr values the provider lists (None: it lists none).

        AcrNotOffered for a value it does not list. A provider that lists none is asked
        for them all the same, and they are never shown to the person.
        """
        if not self.acr_values or supported is None:
            return self
        unlisted = [value for value in self.acr_values if value not in supported]
        if unlisted:
            raise AcrNotOffered(unlisted, supported)
        return replace(self, listed=True)

    def __bool__(self) -> bool:
        return bool(self.acr_values) or self.max_age is not None

    def unmet(self, acr: str, auth_time: int, asked_at: float, leeway: int = 0) -> str:
        """Why a sign-in with this acr and auth_time does not meet it ("" when it does).

        `asked_at` (Unix seconds) is when the request came: max_age counts back from it,
        `leeway` seconds more for a sign-in the provider made for it.
        """
        if self.acr_values and acr not in self.acr_values:
            return f"its acr is {acr!r}" if acr else "the identity provider named no acr for it"
        if self.max_age is None:
            return ""
        if not auth_time:
            return "the identity provider did not say when the person authenticated (no auth_time)"
        age = int(asked_at) - auth_time
        if age > self.max_age + leeway:
            return f"the person authenticated {age} s before the request"
        return ""

    def refusal(
        self, owner: str, asked_at: float, account_id: str, acr: str, auth_time: int
    ) -> str:
        """Why a sign-in begun for this step-up of account `owner` is not taken ("" if it is).

        Another user's sign-in replaces nothing and adds no account; one short of what was
        asked (a provider may answer with another acr) is not taken either: the account
        keeps its session.
        """
        if account_id != owner:
            return (
                f"another user signed in ({account_id}) where a step-up of {owner} was asked"
                f" for; {owner} keeps its session: sign in as its user"
            )
        unmet = self.unmet(acr, auth_time, asked_at, CLOCK_LEEWAY_SECONDS)
        if unmet:
            return (
                f"the identity provider did not give what the step-up asked ({self}): {unmet};"
                f" {owner} keeps its session"
            )
        return ""

    def authorize_params(self, *, acr_unmet: bool, offline: bool = False) -> dict[str, str]:
        """The authorize parameters of a sign-in that meets it (OpenID Connect Core 3.1.2.1).

        prompt=login only when the acr is not met: a provider may answer acr_values
        from its own browser session at that session's strength (panva's oidc-provider
        treats them as voluntary), while max_age alone makes it authenticate afresh.
        `offline`: the session holds offline_access, which OpenID Connect Core 11 grants
        only with prompt=consent, so a prompt asks for consent as well.
        """
        params: dict[str, str] = {}
        if self.acr_values:
            params["acr_values"] = " ".join(self.acr_values)
        if self.max_age is not None:
            params["max_age"] = str(self.max_age)
        if acr_unmet:
            params["prompt"] = "login consent" if offline else "login"
        return params

    def __str__(self) -> str:
        asked = []
        if self.acr_values:
            asked.append(f"acr {' or '.join(self.acr_values)}" if self.listed else UNLISTED_ACR)
        if self.max_age is not None:
            asked.append(f"an authentication at most {self.max_age} s old")
        return " and ".join(asked)
