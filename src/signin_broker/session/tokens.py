"""An account's tokens at one moment, and what each answer of the provider makes of them.

Whether they want renewing now is session.schedule's rule (docs/contract.md §7: at 75 %
of the lifetime, or sooner when a caller needs them to last longer than they will);
the methods below ask it, and hold no number of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import schedule

if TYPE_CHECKING:
    from ..oidc.answers import TokenResponse


@dataclass(frozen=True, slots=True)
class TokenSet:
    """The tokens of one account at one moment; secrets are kept out of repr."""

    access_token: str = field(repr=False)
    token_type: str
    scopes: tuple[str, ...]
    issued_at: float
    expires_at: float
    refresh_token: str | None = field(repr=False, default=None)
    id_token: str | None = field(repr=False, default=None)
    # The provider issued these answering a refresh of this process (not kept on disk):
    # renewing them again for a caller's min_ttl would bring nothing longer.
    from_refresh: bool = False
    # How many times the refresh token was sent with no usable answer back (the daemon
    # counts a send before making it). The provider may have spent it (rotation), and a
    # second use reads as theft (RFC 9700 4.14.2), so after each lost answer it is sent
    # once more only to learn whether the provider had it, never at once: when
    # schedule.due_at says (about to expire). A request the provider never saw costs
    # nothing; one it completed was lost anyway, and the resend's invalid_grant ends the
    # session cleanly.
    unanswered: int = 0
    # The provider handed the refresh token back at the last refresh, and was never seen
    # to rotate it: a request whose answer was lost cannot have spent it.
    refresh_kept: bool = False
    # The provider answered a refresh of this session with a new refresh token: it
    # rotates them, so one it answered (however unusably) is never sent to it again.
    refresh_rotates: bool = False
    # Why the session has no refresh token left to send (it was spent by an answer that
    # could not be used); "" when it has one, or the provider never gave one.
    refresh_lost: str = ""

    @classmethod
    def issued(
        cls, response: TokenResponse, now: float, requested_scopes: tuple[str, ...]
    ) -> TokenSet:
        """The tokens of a fresh token response (scopes as granted, else as requested)."""
        return cls(
            access_token=response.access_token,
            token_type=response.token_type,
            scopes=response.scope if response.scope is not None else requested_scopes,
            issued_at=now,
            expires_at=now + response.expires_in,
            refresh_token=response.refresh_token,
            id_token=response.id_token,
        )

    def renewed(self, response: TokenResponse, now: float) -> TokenSet:
        """The tokens after a refresh; a refresh token or id_token not re-sent is kept."""
        fresh = TokenSet.issued(response, now, self.scopes)
        if response.lifetime_unsure:  # an absurd lifetime: assume the one they had
            fresh = replace(fresh, expires_at=now + min(self.lifetime, response.expires_in))
        rotated = self.rotated(response)
        return replace(
            fresh,
            refresh_token=rotated.refresh_token,
            refresh_kept=rotated.refresh_kept,
            refresh_rotates=rotated.refresh_rotates,
            id_token=fresh.id_token or self.id_token,
            from_refresh=True,
        )

    def rotated(self, response: TokenResponse) -> TokenSet:
        """These tokens with the refresh token a refresh answered with (this one if none)."""
        rotates = self.refresh_rotates or response.refresh_token not in (None, self.refresh_token)
        return replace(
            self,
            refresh_token=response.refresh_token or self.refresh_token,
            refresh_kept=not rotates,
            refresh_rotates=rotates,
        )

    @property
    def refresh_in_doubt(self) -> bool:
        """Whether the refresh token's last send got no answer: the provider may have spent it."""
        return self.unanswered > 0

    def sent(self) -> TokenSet:
        """These tokens as the store keeps them while their refresh token is out (write-ahead)."""
        return replace(self, unanswered=self.unanswered + 1)

    def shifted(self, seconds: float) -> TokenSet:
        """These tokens with their times moved (from one clock to another)."""
        return replace(
            self, issued_at=self.issued_at + seconds, expires_at=self.expires_at + seconds
        )

    @property
    def lifetime(self) -> float:
        """Seconds between issue and expiry."""
        return self.expires_at - self.issued_at

    def is_valid(self, now: float) -> bool:
        """Whether the access token has not expired yet."""
        return now < self.expires_at

    def lasts(self, now: float, seconds: float) -> bool:
        """Whether the access token is valid `seconds` more."""
        return self.is_valid(now) and self.expires_at - now >= seconds

    def is_due(self, now: float) -> bool:
        """Whether they are renewed now, whoever asks (schedule.due_at)."""
        return now >= self.refresh_due_at()

    def wants_refresh(self, now: float, min_ttl: float = 0) -> bool:
        """Due (is_due), or not lasting min_ttl seconds more."""
        return self.is_due(now) or not self.lasts(now, min_ttl)

    def serves(self, now: float, min_ttl: float, refused: bool = False) -> bool:
        """Whether these tokens may be handed out as they are, with no renewal.

        `refused`: a server refused them (HTTP 401); they are renewed, unless they came
        from a renewal too recent to renew again (schedule.refused_renewal_allowed).
        """
        if refused:
            age = now - self.issued_at
            return self.from_refresh and not schedule.refused_renewal_allowed(age, self.lifetime)
        return not self.wants_refresh(now, min_ttl)

    def renewal_would_hammer(self, now: float, min_ttl: float) -> bool:
        """Whether renewing these just-renewed tokens for a caller's min_ttl is refused.

        Past the lifetime no renewal helps; close to it, a caller could make one renewal
        a second (60 s tokens, min_ttl 59): schedule.min_ttl_renewal_allowed says when.
        """
        if not self.from_refresh or self.is_due(now):
            return False
        return not schedule.min_ttl_renewal_allowed(now - self.issued_at, self.lifetime, min_ttl)

    def refresh_due_at(self, early_fraction: float = 0.0) -> float:
        """When the background loop renews them (schedule.due_at), less a head start's share."""
        return schedule.due_at(
            self.issued_at, self.expires_at, early_fraction, in_doubt=self.refresh_in_doubt
        )

    def to_record(self) -> dict[str, Any]:
        """A JSON-able form for the encrypted store."""
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "scopes": list(self.scopes),
            "issued_at": self.issued_at,
            "expires_at": self.expires_at,
            "refresh_token": self.refresh_token,
            "id_token": self.id_token,
            "refresh_unanswered": self.unanswered,
            "refresh_kept": self.refresh_kept,
            "refresh_rotates": self.refresh_rotates,
            "refresh_lost": self.refresh_lost,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> TokenSet:
        """Back from to_record(); KeyError or TypeError when the record is not one."""
        return cls(
            access_token=str(record["access_token"]),
            token_type=str(record["token_type"]),
            scopes=tuple(str(s) for s in record["scopes"]),
            issued_at=float(record["issued_at"]),
            expires_at=float(record["expires_at"]),
            refresh_token=record.get("refresh_token"),
            id_token=record.get("id_token"),
            unanswered=_unanswered(record),
            refresh_kept=record.get("refresh_kept") is True,
            refresh_rotates=record.get("refresh_rotates") is True,
            refresh_lost=str(record.get("refresh_lost") or ""),
        )


def _unanswered(record: dict[str, Any]) -> int:
    """Sends without an answer; a record from before the count said only "in doubt"."""
    count = record.get("refresh_unanswered")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    return 1 if record.get("refresh_in_doubt") is True else 0
