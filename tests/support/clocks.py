"""The one fake clock of the tests: seconds that move only when a test says so.

It stands in for `time.time` or `time.monotonic` (a `Callable[[], float]`), as every
clock the code takes does.
"""

from __future__ import annotations


class FakeClock:
    """A clock reading `now`, which a test sets or advances."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
