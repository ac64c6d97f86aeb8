"""The live objects of a real daemon process, counted by type from inside it on request.

The daemon runs as usual (`signin_broker.daemon.main`), started through a few lines
that first install a SIGUSR2 handler: on the signal it collects garbage, counts the
objects the collector tracks by their type's qualified name, and writes the counts
(JSON) to a file beside the socket. Tests send the signal and read the file; nothing
of this is in the daemon itself.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path

from signin_broker_testing.daemon import DaemonProcess
from support.waiting import eventually

COUNTING = r"""
import collections, gc, json, os, signal, sys

def count(signum, frame):
    # Python may run this again inside itself, for a signal sent while it runs: each run
    # takes its number first, writes a file of its own, and says how many were asked
    # for by then (a test that waits for its own number takes any later count too).
    counted[0] += 1
    mine = counted[0]
    gc.collect()
    found = collections.Counter(
        f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.get_objects()
    )
    path = sys.argv[1]
    with open(f"{path}.{mine}.tmp", "w") as out:
        json.dump({"asked": counted[0], "objects": found}, out)
    os.replace(f"{path}.{mine}.tmp", path)

counted = [0]
signal.signal(signal.SIGUSR2, count)
from signin_broker.daemon.main import main
sys.exit(main(sys.argv[2:]))
"""


class CountedDaemon(DaemonProcess):
    """A DaemonProcess whose live objects can be counted (`objects()`)."""

    def __init__(self, socket_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__(socket_path, *args, env=env)
        self.counts_path = socket_path.parent.parent / "objects.json"
        # `python -c COUNTING <counts file> <the daemon's own arguments>`
        self.args[1:3] = ["-c", COUNTING, str(self.counts_path)]
        self._asked = 0
        self.at_start: Counter[str] = Counter()  # for a test to compare with

    def objects(self) -> Counter[str]:
        """The daemon's live objects by type, after a full garbage collection."""
        self._asked += 1
        asked = self._asked
        os.kill(self.pid, signal.SIGUSR2)

        def written() -> dict[str, object] | None:
            try:
                found = json.loads(self.counts_path.read_text())
            except (OSError, ValueError):
                return None
            return found if found["asked"] >= asked else None

        found = eventually(written, "the daemon to count its objects", timeout=30, every=0.05)
        return Counter(found["objects"])  # type: ignore[arg-type]
