"""When the daemon talks to the provider: the whole timing policy, with its jitter.

Renewal at 75 % of a token's lifetime (earlier by a jitter share in the background),
how often a caller's min_ttl may renew again, re-validation within the contract's
60 s, and backoff after failures: all of it here, so the fleet benchmark simulates
exactly what daemons do. The randomness spreads load across devices; it is not a
secret, so `random` is right here.
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


def renewal_due_at(issued_at: float, lifetime: float, early_fraction: float = 0.0) -> float:
    """When a token is renewed: at 75 % of its lifetime, minus a background head start."""
    return issued_at + (REFRESH_AT_FRACTION - early_fraction) * lifetime


def last_moment(expires_at: float, lifetime: float) -> float:
    """Shortly before a token expires: the renewals that wait, wait until then."""
    return expires_at - min(LAST_MOMENT_SECONDS, lifetime / 4)


def min_ttl_renewal_allowed(age: float, lifetime: float, min_ttl: float) -> bool:
    """Whether a token renewed `age` seconds ago may be renewed again for this min_ttl."""
    if lifetime <= min_ttl:
        return False  # no renewal helps
    return 2 * min_ttl <= lifetime or age >= MIN_TTL_RENEWAL_FRACTION * lifetime


def refresh_early_fraction() -> float:
    """A device's own head start for background renewals, drawn once per token."""
    return random.uniform(0, REFRESH_JITTER_FRACTION)  # noqa: S311


def revalidation_period(bound: float, answer_seconds: float = ASSUMED_ANSWER_SECONDS) -> float:
    """How long after one re-validation the next may start, for a revocation to show in time.

    A revocation right after a check is seen by the next one, which must have its
    answer within `bound` (the contract's 60 s): so the next starts `bound` less twice
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
