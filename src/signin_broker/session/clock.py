"""The daemon's clock for token lifetimes and schedules: wall-clock seconds that never go back.

A token lives `expires_in` seconds from when it was asked for, and two clocks can say
how long that was. NTP steps a device's wall clock by minutes (one that booted wrong,
or drifted): stepped back, it would make a dead token look valid and postpone renewals
and re-validation. CLOCK_BOOTTIME never jumps and, unlike CLOCK_MONOTONIC, counts a
suspend; but a virtual machine paused for hours does not advance it, while the world's
clocks (the provider's, and the guest's wall clock once it is synced) did move on, and
the tokens died. So the sessions' clock advances, between two readings, by the larger
of what the boot clock and the wall clock say passed: a step back is ignored, a jump
forward is taken (at the cost of one early renewal, when the jump was a correction).
What leaves the daemon (expiry times for apps, the stored state) is said in the wall
clock of the moment (`to_wall`). A stored moment carries the boot clock's reading too,
so that a restart after the wall clock went back finds the state's true age (`age`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Counts suspend on Linux; elsewhere the monotonic clock (macOS's, too, stops asleep).
_STEADY = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # Linux: new at every boot


# Read five times per GetToken: a partial of the builtin, not one more Python frame.
_steady: Callable[[], float] = functools.partial(time.clock_gettime, _STEADY)


@functools.cache
def boot_id() -> str:
    """The id of the running boot (Linux): a stored boot-clock reading counts within one boot."""
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""  # no boot id: a stored reading of the boot clock is never used


@dataclass(frozen=True, slots=True)
class Moment:
    """A moment as the wall clock and the boot clock read it, kept with stored state."""

    wall: float
    boot: str = ""  # boot_id(); "" when unknown
    since_boot: float = 0.0

    def to_record(self) -> dict[str, Any]:
        return {"wall": self.wall, "boot": self.boot, "since_boot": self.since_boot}

    @classmethod
    def from_record(cls, record: object) -> Moment | None:
        """Back from to_record(); None when there is none (state of an earlier version)."""
        if not isinstance(record, dict):
            return None
        wall, boot, since_boot = record.get("wall"), record.get("boot"), record.get("since_boot")
        if not isinstance(wall, (int, float)) or not isinstance(since_boot, (int, float)):
            return None
        return cls(float(wall), boot if isinstance(boot, str) else "", float(since_boot))


class SteadyClock:
    """The wall clock at start, advanced by the larger of what the boot and wall clocks say."""

    def __init__(
        self,
        wall: Callable[[], float] = time.time,
        steady: Callable[[], float] = _steady,
        boot: Callable[[], str] = boot_id,
    ) -> None:
        self._wall, self._steady, self._boot = wall, steady, boot
        self._last_wall, self._last_steady = wall(), steady()
        self._now = self._last_wall

    def __call__(self) -> float:
        """Seconds since the epoch as the wall clock said at start, advanced as said above.

        Read on the event loop's thread (GetToken's hot path: no lock).
        """
        wall, steady = self._wall(), self._steady()
        self._now += max(steady - self._last_steady, wall - self._last_wall, 0.0)
        self._last_wall, self._last_steady = wall, steady
        return self._now

    def wall_step(self) -> float:
        """How far the wall clock is from this clock (seconds; negative: it went back)."""
        now = self()
        return self._last_wall - now

    def moment(self) -> Moment:
        """Now, as stored state keeps it."""
        return Moment(self._wall(), self._boot(), self._steady())

    def age(self, moment: Moment) -> float:
        """Seconds since a stored moment: the larger of the wall clock's and the boot clock's."""
        passed = self._wall() - moment.wall
        if moment.boot and moment.boot == self._boot():
            passed = max(passed, self._steady() - moment.since_boot)
        return max(passed, 0.0)


def to_wall(clock: Callable[[], float], moment: float) -> float:
    """A moment of `clock` in the wall clock of now (a plain clock is its own wall clock)."""
    return moment + clock.wall_step() if isinstance(clock, SteadyClock) else moment


def moment_of(clock: Callable[[], float]) -> Moment:
    """Now, as stored state keeps it (a plain clock: its reading as the wall clock)."""
    return clock.moment() if isinstance(clock, SteadyClock) else Moment(clock())


def since_stored(clock: Callable[[], float], saved: Moment | None) -> float:
    """How far wall-clock times stored at `saved` move to be `clock`'s.

    The wall clock may have stepped since (back, and a token would look younger than it
    is): the moment of the save is now less its age, the larger of the two clocks'.
    State stored without its moment is read in the wall clock of now.
    """
    if saved is None:
        return -to_wall(clock, 0.0)
    if isinstance(clock, SteadyClock):
        return clock() - clock.age(saved) - saved.wall
    return min(saved.wall, clock()) - saved.wall
