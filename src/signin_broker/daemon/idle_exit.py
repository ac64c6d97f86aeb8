"""Exit when idle: the daemon goes away once it has had no work of its own for a while.

The state is encrypted at rest with a key the daemon reopens without the person, so a
daemon nobody asks can exit and come back at the next call: its service manager keeps
the socket and starts it again (socket activation), or a client starts it (autostart,
autostart.py). What holds while it runs holds across the gap: the first token
of a restored session waits for a confirmation with the provider
(session/fresh_tokens/revalidation.py), and a renewal is never cut, since one under
way is work of its own.

Whether the daemon has work of its own is asked in one place, a table of `Work` rows
(daemon/app.py builds it): each names a kind of work and counts how much of it there is
now. A room that keeps the daemon busy adds its row there.

Once it is decided, the exit loses no caller: the socket first takes no more (the
service manager's keeps them queued for the next daemon; the daemon's own file is
removed, and what was queued on it already is taken in), then whoever got in is
answered as at any other time, and the daemon stops once they have gone.

The default depends on how the daemon was started (`idle_exit_seconds` unset):
socket activation and autostart: 600 s, since something brings the daemon back at the
next call, and an idle daemon costs a shared machine 32 MB a user (its PSS beside a
hundred others: benchmarks/bench_login_node.py); a daemon started by
hand or by a service manager without its socket: never, since nothing would start it
again (launchd's agent runs it so, and does not restart a clean exit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
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
# Once the socket takes no more callers: how long what was queued on it has to be taken
# in, and the callers that got in to be answered and go, before the daemon stops anyway.
CALLERS_IN_SECONDS = 2.0
POLL_SECONDS = 0.005


@dataclass(frozen=True, slots=True)
class Work:
    """One kind of work the daemon may have of its own, and how much of it there is now."""

    name: str
    count: Callable[[], int]


# A test hook for an idle exit shorter than a second (a test's hundred cycles): it may
# only shorten one that is in force.
TEST_SECONDS_ENV = "SIGNIN_BROKER_TEST_IDLE_EXIT_SECONDS"
# A test hook that holds an idle exit between its decision and the socket taking no more
# callers, the instant in which a caller may still get in: a test stands one there.
TEST_PAUSE_ENV = "SIGNIN_BROKER_TEST_IDLE_EXIT_PAUSE_SECONDS"


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


def test_pause(environ: Mapping[str, str] = os.environ) -> float:
    """The seconds an idle exit waits after its decision (0 but in a test: TEST_PAUSE_ENV)."""
    try:
        seconds = float(environ.get(TEST_PAUSE_ENV, ""))
    except ValueError:
        return 0.0
    if not 0 < seconds <= CALLERS_IN_SECONDS:
        return 0.0
    log.warning(f"TEST MODE: an idle exit waits {seconds:g} s once decided ({TEST_PAUSE_ENV})")
    return seconds


async def queue_taken_in(listening: socket.socket) -> None:
    """Return once nothing is queued on the listening socket, whose file is gone.

    Nobody can connect to it any more, so the queue only shrinks as the server takes
    each caller in; a caller that connected just before the file went is served.
    """
    queued = select.poll()
    queued.register(listening.fileno(), select.POLLIN)
    deadline = time.monotonic() + CALLERS_IN_SECONDS
    while queued.poll(0) and time.monotonic() < deadline:  # noqa: ASYNC110 - no event says it
        await asyncio.sleep(POLL_SECONDS)


async def callers_gone(callers: Callable[[], int]) -> None:
    """Return once the callers that got in have been answered and have gone.

    At most CALLERS_IN_SECONDS: then the stop gives calls in flight their own grace and
    closes what is left (an app's open channel reconnects to the next daemon).
    """
    deadline = time.monotonic() + CALLERS_IN_SECONDS
    while callers() and time.monotonic() < deadline:  # noqa: ASYNC110 - bounded, 5 ms
        await asyncio.sleep(POLL_SECONDS)


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
