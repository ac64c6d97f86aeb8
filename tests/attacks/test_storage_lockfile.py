"""A symlink planted at the daemon's lock file must not redirect its write.

The daemon writes its pid into `<socket folder>/.<socket name>.lock`. Opened through a
symlink, that write lands in whatever file the link names: before the fix a victim
file of the user's had its content replaced by the pid, and a missing target was
created. The daemon must refuse to start, say why, and leave the target alone.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from signin_broker_testing.daemon import DaemonProcess

VICTIM_TEXT = "the user's notes, which no daemon should touch\n"


@pytest.mark.parametrize("target", ["an existing file", "a missing file"])
def test_a_symlink_at_the_lock_file_stops_the_daemon_and_spares_its_target(
    socket_path: Path, folder: Path, target: str
) -> None:
    socket_path.parent.mkdir(mode=0o700)
    victim = folder / "notes.txt"
    if target == "an existing file":
        victim.write_text(VICTIM_TEXT)
    lock = socket_path.parent / f".{socket_path.name}.lock"
    lock.symlink_to(victim)

    daemon = DaemonProcess(socket_path).start(wait=False)
    deadline = time.monotonic() + 30
    while daemon.alive and not daemon.logs_with(msg="ready") and time.monotonic() < deadline:
        time.sleep(0.05)  # until it gives up, or serves (as it did before the fix)

    if target == "an existing file":
        assert victim.read_text() == VICTIM_TEXT
    else:
        assert not victim.exists()
    assert daemon.wait_exit(timeout=15) == 1, daemon.output()
    assert str(lock) in daemon.output() and "symlink" in daemon.output(), daemon.output()
    assert lock.is_symlink() and os.readlink(lock) == str(victim)  # left for the user to see
    assert not socket_path.exists()
