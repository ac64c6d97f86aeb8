"""The daemon's own resident memory: measured for GetStatus, and given back after bursts.

Linux gives the current figure in /proc/self/statm; elsewhere (macOS) getrusage gives
the peak, which for a long-running daemon that frees little is close to it.

What a burst of connections frees stays in the process: glibc's malloc hands back the
top of its heap by itself, never the free pages in its middle, and Python's allocator
keeps an arena while any block in it lives. Once many connections have ended, and none
has for a second, a full garbage collection (which also empties Python's free lists,
whose blocks would keep arenas mapped) and glibc's malloc_trim give back what they can:
9 of the 26 MB that 500 dropped event streams had taken, here. Where there is no glibc,
only the collection runs.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import cast

log = logging.getLogger(__name__)

GIVE_BACK_AFTER = 64  # connections and the calls they cut off, since memory was given back
GIVE_BACK_DELAY_SECONDS = 1.0  # with no connection ending: the burst is over


def resident_bytes() -> int:
    """The resident set size of the process in bytes (the peak where the current is unknown)."""
    try:
        with open("/proc/self/statm", "rb") as statm:  # noqa: PTH123 - a bytes read, no Path
            resident_pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB here
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class FreedMemory:
    """Counts ended connections and calls; once a burst of them is over, gives memory back.

    Only when the burst is over (no connection ended for `delay` seconds): a daemon
    under steady churn reuses what it frees, and a collection is a pause of its loop.
    """

    def __init__(
        self,
        after: int = GIVE_BACK_AFTER,
        delay: float = GIVE_BACK_DELAY_SECONDS,
        give_back: Callable[[], None] | None = None,
    ) -> None:
        self._after = after
        self._delay = delay
        self._give_back = give_back or _collect_and_trim
        self._ended = 0
        self._last_end = 0.0
        self._due: asyncio.TimerHandle | None = None

    def ended(self, count: int = 1) -> None:
        """Connections and calls have ended, and what they held is free (called on the loop)."""
        loop = asyncio.get_running_loop()
        self._ended += count
        self._last_end = loop.time()
        if self._ended >= self._after and self._due is None:
            self._due = loop.call_later(self._delay, self._when_quiet)

    def _when_quiet(self) -> None:
        loop = asyncio.get_running_loop()
        still = self._last_end + self._delay - loop.time()
        if still > 0:  # more ended meanwhile: the burst goes on
            self._due = loop.call_later(still, self._when_quiet)
            return
        self._due, self._ended = None, 0
        self._give_back()


def _collect_and_trim() -> None:
    before, began = resident_bytes(), time.perf_counter()
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    log.debug(
        "gave freed memory back",
        extra={
            "rss_before_bytes": before,
            "rss_after_bytes": resident_bytes(),
            "milliseconds": round((time.perf_counter() - began) * 1000, 1),
        },
    )


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The malloc_trim of glibc, or None (musl, macOS); ctypes loads at the first burst."""
    import ctypes

    try:
        function = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
    return cast(Callable[[int], int], function)
