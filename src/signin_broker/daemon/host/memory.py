"""The daemon's own resident memory, for GetStatus: a file read, not a library.

Linux gives the current figure in /proc/self/statm; elsewhere (macOS) getrusage gives
the peak, which for a long-running daemon that frees little is close to it.
"""

from __future__ import annotations

import os
import resource
import sys


def resident_bytes() -> int:
    """The resident set size of the process in bytes (the peak where the current is unknown)."""
    try:
        with open("/proc/self/statm", "rb") as statm:  # noqa: PTH123 - a bytes read, no Path
            resident_pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # bytes there, KiB here
    return resident_pages * os.sysconf("SC_PAGE_SIZE")
