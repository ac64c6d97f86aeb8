"""Exit when idle: the daemon goes away once it has had no work of its own for a while.

The state is encrypted at rest with a key the daemon reopens without the person, so a
daemon nobody asks can exit and come back at the next call: its service manager keeps
the socket and starts it again (socket activation), or a client starts it (autostart,
client/_autostart.py). What holds while it runs holds across the gap: the first token
of a restored session waits for a confirmation with the provider
(session/fresh_tokens/renewal.py), and a renewal is never cut, since one under way is work
of its own.

Whether the daemon has work of its own is asked in one place, a table of `Work` rows
(daemon/app.py builds it): each names a kind of work and counts how much of it there is
now. A room that keeps the daemon busy adds its row there.

The default depends on how the daemon was started (`idle_exit_seconds` unset):
socket activation and autostart: 600 s, since something brings the daemon back at the
next call, and an idle daemon costs a shared machine 60 MB a user; a daemon started by
hand or by a service manager without its socket: never, since nothing would start it
again (launchd's agent runs it so, and does not restart a clean exit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

NEVER = 0
# By start mode: the daemon's own word for it (api/service_info.py's started_by).
STARTED_BY_ACTIVATION = "socket activation"
STARTED_BY_AUTOSTART = "autostart"
DEFAULT_SECONDS = {STARTED_BY_ACTIVATION: 600, STARTED_BY_AUTOSTART: 600}
MAX_SECONDS = 7 * 24 * 3600
LONGEST_LOOK_SECONDS = 1.0  # how often idleness is looked at, at most this far apart


@dataclass(frozen=True, slots=True)
class Work:
    """One kind of work the daemon may have of its own, and how much of it there is now."""

    name: str
    count: Callable[[], int]


# A test hook for an idle exit shorter than a second (a test's hundred cycles): it may
# only shorten one that is in force.
TEST_SECONDS_ENV = "SIGNIN_BROKER_TEST_IDLE_EXIT_SECONDS"


def seconds_for(
    setting: int | None, started_by: str, environ: Mapping[str, str] = os.environ
) -> float:
    """The idle exit in force: the setting, else the default of the start mode (0: never)."""
    seconds = setting if setting is not None else DEFAULT_SECONDS.get(started_by, NEVER)
    try:
        shorter = float(environ.get(TEST_SECONDS_ENV, ""))
    except ValueError:
        return seconds
    if seconds == NEVER or not 0 < shorter < seconds:
        return seconds
    log.warning(f"TEST MODE: idle exit after {shorter:g} s ({TEST_SECONDS_ENV})")
    return shorter


class IdleExit:
    """Watches the daemon's work of its own and says when it has had none for `seconds`."""

    def __init__(
        self,
        seconds: float,
        work: Sequence[Work],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self._work = tuple(work)
        self._clock = clock

    def busy(self) -> dict[str, int]:
        """The work under way now, by kind (empty: the daemon is idle)."""
        counts = {work.name: work.count() for work in self._work}
        return {name: count for name, count in counts.items() if count}

    async def idle(self) -> None:
        """Return once the daemon has had no work of its own for `seconds`; never for 0.

        Idleness is looked at every second at most (sooner for a short setting), so the
        exit comes at most that long after the setting's seconds.
        """
        if self.seconds == NEVER:
            await asyncio.Event().wait()  # until cancelled
        look = min(LONGEST_LOOK_SECONDS, self.seconds / 4)
        idle_since = self._clock()
        while True:
            await asyncio.sleep(look)
            now = self._clock()
            if self.busy():
                idle_since = now
            elif now - idle_since >= self.seconds:
                log.info("exiting: idle", extra={"idle_exit_seconds": self.seconds})
                return
