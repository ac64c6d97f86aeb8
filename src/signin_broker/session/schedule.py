"""When the daemon talks to the provider on its own: the timing policy, with its jitter.

Kept in one place so that the fleet benchmark simulates exactly what daemons do. The
randomness spreads load across devices; it is not a secret, so `random` is right here.
"""

from __future__ import annotations

import random

# Background renewals start up to this share of the lifetime before the 75 % mark, so
# that a fleet signed in in the same second renews over minutes, not in one burst.
REFRESH_JITTER_FRACTION = 0.15
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 60.0


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
