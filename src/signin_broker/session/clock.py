"""The daemon's clock for token lifetimes and schedules: wall-clock seconds that never jump.

A token lives `expires_in` seconds from when it arrived, whatever the wall clock does
meanwhile: NTP steps a device's clock by minutes (one that booted wrong, or drifted),
and a clock stepped back would make a dead token look valid and postpone renewals
and re-validation; stepped forward, it would end sessions early. So the sessions run
on the wall clock as it was at start, advanced by CLOCK_BOOTTIME, which does not
jump and, unlike CLOCK_MONOTONIC, counts a suspend. What leaves the daemon (expiry
times for apps, the stored state) is said in the wall clock of the moment (`to_wall`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Counts suspend on Linux; elsewhere the monotonic clock (macOS's, too, stops asleep).
_STEADY = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


def _steady() -> float:
    return time.clock_gettime(_STEADY)


class SteadyClock:
    """The wall clock at start, advanced by a clock that never jumps."""

    def __init__(
        self, wall: Callable[[], float] = time.time, steady: Callable[[], float] = _steady
    ) -> None:
        self._wall, self._steady = wall, steady
        self._started_wall, self._started_steady = wall(), steady()

    def __call__(self) -> float:
        """Seconds since the epoch as the wall clock said at start, advanced steadily."""
        return self._started_wall + (self._steady() - self._started_steady)

    def wall_step(self) -> float:
        """How far the wall clock stepped since start (seconds; negative: it went back)."""
        return self._wall() - self()


def to_wall(clock: Callable[[], float], moment: float) -> float:
    """A moment of `clock` in the wall clock of now (a plain clock is its own wall clock)."""
    return moment + clock.wall_step() if isinstance(clock, SteadyClock) else moment
