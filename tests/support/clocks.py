"""The tests' wrong clocks: a fake one that moves only when a test says so, and a real one off.

FakeClock stands in for `time.time` or `time.monotonic` (a `Callable[[], float]`), as
every clock the code takes does; faked_clock runs a whole process on a wall clock that
is off (libfaketime), for the daemon and the doctor.
"""

from __future__ import annotations

from pathlib import Path

from support.real import unavailable

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")


class FakeClock:
    """A clock reading `now`, which a test sets or advances."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def faked_clock(offset_file: Path, offset: str) -> dict[str, str]:
    """The environment that runs a process with its wall clock `offset` off (e.g. "-10m")."""
    if not LIBFAKETIME.exists():
        unavailable("libfaketime is not installed (Debian: faketime)")
    offset_file.write_text(offset + "\n")
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(offset_file),
        "FAKETIME_NO_CACHE": "1",
        "DONT_FAKE_MONOTONIC": "1",  # CLOCK_BOOTTIME and CLOCK_MONOTONIC stay true
    }
