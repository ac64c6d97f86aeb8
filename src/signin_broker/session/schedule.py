"""When the daemon talks to the provider: the whole timing policy, with its jitter.

Renewal at 75 % of a token's lifetime (earlier by a jitter share in the background),
how often a caller's min_ttl may renew again, re-validation within the contract's
60 s, and backoff after failures: all of it here, so the fleet benchmark simulates
exactly what daemons do. The randomness spreads load across devices; it is not a
secret, so `random` is right here.
"""

from __future__ import annotations

import random

# A token is renewed, whoever asks, from this share of its lifetime on.
REFRESH_AT_FRACTION = 0.75
# A just-renewed token is renewed again for a caller's min_ttl (above half the lifetime)
# no sooner than this share of its lifetime: else 60 s tokens and a min_ttl of 59 would
# make a renewal a second.
MIN_TTL_RENEWAL_FRACTION = 0.25
# Background renewals start up to this share of the lifetime before the 75 % mark, so
# that a fleet signed in in the same second renews over minutes, not in one burst.
REFRESH_JITTER_FRACTION = 0.15
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0


def renewal_due_at(issued_at: float, lifetime: float, early_fraction: float = 0.0) -> float:
    """When a token is renewed: at 75 % of its lifetime, minus a background head start."""
    return issued_at + (REFRESH_AT_FRACTION - early_fraction) * lifetime


def min_ttl_renewal_allowed(age: float, lifetime: float, min_ttl: float) -> bool:
    """Whether a token renewed `age` seconds ago may be renewed again for this min_ttl."""
    if lifetime <= min_ttl:
        return False  # no renewal helps
    return 2 * min_ttl <= lifetime or age >= MIN_TTL_RENEWAL_FRACTION * lifetime


def refresh_early_fraction() -> float:
    """A device's own head start for background renewals, drawn once per token."""
    return random.uniform(0, REFRESH_JITTER_FRACTION)  # noqa: S311


def next_revalidation(now: float, interval: float) -> float:
    """The next re-validation: never later than `interval` (the 60 s contract bound)."""
    return now + interval * random.uniform(0.75, 1.0)  # noqa: S311


def first_revalidation(now: float, interval: float) -> float:
    """The first re-validation of a restored session: soon, but spread out.

    After a power cut a whole fleet restarts in the same second.
    """
    return now + interval * random.uniform(0.0, 1.0)  # noqa: S311


def retry_after_failure(now: float, failures: int) -> float:
    """Exponential backoff with jitter after `failures` failures in a row (1, 2, 4 ... 60 s)."""
    doublings = min(max(failures - 1, 0), 32)  # 2.0 ** 1024 would overflow: a day's outage
    backoff = min(BACKOFF_MAX_SECONDS, BACKOFF_FIRST_SECONDS * 2.0**doublings)
    return now + backoff * random.uniform(0.8, 1.2)  # noqa: S311
