"""When the daemon talks to the provider: the whole timing rule of renewals, with its jitter.

Renewal at 75 % of a token's lifetime (earlier by a jitter share in the background),
how often a caller's min_ttl or a refused token may renew again, when a refresh token
in doubt is sent once more, how long callers wait for a renewal and a renewal for its
answer, re-validation within 60 s (docs/contract.md §8), backoff after failures and
how often unsaved state is written again: all of it here, so that changing the rule is
a change of this file, and the fleet benchmark simulates exactly what daemons do.
tokens.TokenSet asks here for every decision about its tokens. The randomness spreads
load across devices; it is not a secret, so `random` is right here.
"""

from __future__ import annotations

import random

# How long a sign-in may take, begun over the API or on the page, browser or device.
SIGN_IN_SECONDS = 600
# A token is renewed, whoever asks, from this share of its lifetime on.
REFRESH_AT_FRACTION = 0.75
# A just-renewed token is renewed again for a caller's min_ttl (above half the lifetime)
# no sooner than this share of its lifetime: else 60 s tokens and a min_ttl of 59 would
# make a renewal a second.
MIN_TTL_RENEWAL_FRACTION = 0.25
# A token a server refused (HTTP 401) is renewed for the caller that says so, unless it
# came from a renewal less than this share of its lifetime ago: a server that refuses
# every token must not make the daemon hammer the provider.
REFUSED_RENEWAL_FRACTION = 0.25
# Background renewals start up to this share of the lifetime before the 75 % mark, so
# that a fleet signed in in the same second renews over minutes, not in one burst.
REFRESH_JITTER_FRACTION = 0.15
# Each re-validation comes at up to this share of its period early, so that a fleet's
# checks drift apart instead of staying in step.
REVALIDATE_SPREAD = 0.1
# What a provider's answer is taken to cost before one has been timed (seconds).
ASSUMED_ANSWER_SECONDS = 1.0
# The last moment to renew: this long before the access token expires (or a quarter of
# its lifetime, if shorter). A refresh token whose refresh got no answer is sent once
# more only then (had the provider completed the lost refresh, the session served until
# then).
LAST_MOMENT_SECONDS = 60.0
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0
# A caller whose token is still good waits this long for a renewal, then gets the
# current token while the renewal goes on: an outage never stalls the apps.
RENEWAL_WAIT_SECONDS = 2.0
# A caller whose token no longer serves it waits this long, then is told to try again.
CALLER_WAIT_SECONDS = 10.0
# A caller refused while a renewal is under way is told to ask again this much later.
RENEWAL_RETRY_SECONDS = 5.0
# How long the answer to a refresh, once sent, is awaited while nothing of it arrives
# (the provider's client bounds the whole, however steadily it trickles in): a rotating
# provider that stalls may still complete the refresh.
REFRESH_ANSWER_SECONDS = 180.0
# How often a state that could not be written is tried again.
SAVE_RETRY_SECONDS = 5.0
# How long a provider's requirement of DPoP that a sign-in learned is kept: a provider
# that stopped requiring it gets Bearer tokens at the first sign-in after this, and one
# that still requires it costs that sign-in one refused request.
DPOP_REQUIREMENT_SECONDS = 30 * 24 * 3600
# The keeper looks again at least this often, and never sooner than this after a look.
KEEPER_LONGEST_SLEEP_SECONDS = BACKOFF_MAX_SECONDS
KEEPER_SHORTEST_SLEEP_SECONDS = 0.05


def renewal_due_at(issued_at: float, lifetime: float, early_fraction: float = 0.0) -> float:
    """When a token is renewed: at 75 % of its lifetime, minus a background head start."""
    return issued_at + (REFRESH_AT_FRACTION - early_fraction) * lifetime


def last_moment(expires_at: float, lifetime: float) -> float:
    """Shortly before a token expires: the renewals that wait, wait until then."""
    return expires_at - min(LAST_MOMENT_SECONDS, lifetime / 4)


def due_at(
    issued_at: float, expires_at: float, early_fraction: float = 0.0, *, in_doubt: bool = False
) -> float:
    """When tokens are renewed, whoever asks: renewal_due_at, or last_moment when in doubt.

    A refresh token whose last send got no answer may have been spent by the provider;
    it is sent once more only when the access token is about to expire, so that a
    request the provider never saw costs nothing, and one it completed ends the session
    no sooner than it had to.
    """
    lifetime = expires_at - issued_at
    if in_doubt:
        return last_moment(expires_at, lifetime)
    return renewal_due_at(issued_at, lifetime, early_fraction)


def min_ttl_renewal_allowed(age: float, lifetime: float, min_ttl: float) -> bool:
    """Whether a token renewed `age` seconds ago may be renewed again for this min_ttl."""
    if lifetime <= min_ttl:
        return False  # no renewal helps
    return min_ttl <= steady_min_ttl(lifetime) or age >= MIN_TTL_RENEWAL_FRACTION * lifetime


def steady_min_ttl(lifetime: float) -> float:
    """The longest min_ttl that tokens of this lifetime serve without a renewal each time."""
    return lifetime / 2


def refused_renewal_allowed(age: float, lifetime: float) -> bool:
    """Whether a token a server refused, renewed `age` seconds ago, may be renewed for that."""
    return age >= REFUSED_RENEWAL_FRACTION * lifetime


def keeper_sleep(due_in: float) -> float:
    """How long the keeper sleeps when the next renewal or check is due in `due_in` seconds."""
    return max(KEEPER_SHORTEST_SLEEP_SECONDS, min(due_in, KEEPER_LONGEST_SLEEP_SECONDS))


def refresh_early_fraction() -> float:
    """A device's own head start for background renewals, drawn once per token."""
    return random.uniform(0, REFRESH_JITTER_FRACTION)  # noqa: S311


def revalidation_period(bound: float, answer_seconds: float = ASSUMED_ANSWER_SECONDS) -> float:
    """How long after one re-validation the next may start, for a revocation to show in time.

    A revocation right after a check is seen by the next one, which must have its
    answer within `bound` (60 s, docs/contract.md §8): so the next starts `bound` less twice
    the provider's usual answer time and a second, not at a fixed fraction of it. At
    the 60 s default that is about one request a minute, where a fixed half-interval
    made two.
    """
    margin = min(bound / 2, 1.0 + 2 * answer_seconds)
    return bound - margin


def next_revalidation(
    now: float, bound: float, answer_seconds: float = ASSUMED_ANSWER_SECONDS
) -> float:
    """The next re-validation: as late as revalidation_period allows, spread a little."""
    period = revalidation_period(bound, answer_seconds)
    return now + period * random.uniform(1 - REVALIDATE_SPREAD, 1.0)  # noqa: S311


def first_revalidation(
    now: float, bound: float, answer_seconds: float = ASSUMED_ANSWER_SECONDS
) -> float:
    """The first re-validation of a restored session: soon, but spread out.

    After a power cut a whole fleet restarts in the same second.
    """
    return now + revalidation_period(bound, answer_seconds) * random.uniform(0.0, 1.0)  # noqa: S311


def retry_after_failure(now: float, failures: int) -> float:
    """Exponential backoff with jitter after `failures` failures in a row (1, 2, 4 ... 60 s)."""
    doublings = min(max(failures - 1, 0), 32)  # 2.0 ** 1024 would overflow: a day's outage
    backoff = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2.0**doublings)
    return now + backoff * random.uniform(0.8, 1.2)  # noqa: S311
