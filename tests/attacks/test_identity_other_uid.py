"""Another uid at a socket whose folders were opened up must get nothing from it.

Before the fix, such a caller's connection was accepted and relayed to gRPC (it got an
HTTP/2 answer and a PERMISSION_DENIED), and the private socket beside the public one
was reachable too. Now the kernel's credentials are read at accept and another uid's
connection is closed before a byte is read or written, however often it tries.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing.daemon import DaemonProcess
from support.other_user import other_user

ATTEMPTS = 50

# Run as root: imports first, then drops to the user, then dials the socket ATTEMPTS times,
# each time sending the HTTP/2 preface and waiting (bounded) for an answer or the close.
PROBE = r"""
import json, os, pwd, socket, sys

user, socket_path, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
entry = pwd.getpwnam(user)
os.setgroups([])
os.setgid(entry.pw_gid)
os.setuid(entry.pw_uid)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
connected = answered = closed = 0
for _ in range(count):
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(5)
        conn.connect(socket_path)
        connected += 1
        try:
            conn.sendall(PREFACE)
            if conn.recv(65536):
                answered += 1
            else:
                closed += 1
        except (BrokenPipeError, ConnectionResetError):
            closed += 1
        except OSError:
            pass  # neither answered nor closed within the timeout
counts = {"connected": connected, "answered": answered, "closed": closed}
print(json.dumps({"uid": os.getuid(), **counts}))
"""


def test_another_uid_is_closed_unanswered_at_every_attempt_and_the_owner_is_still_served(
    daemon: DaemonProcess, folder: Path
) -> None:
    user = other_user()
    for opened in (daemon.socket_path.parent.parent, daemon.socket_path.parent):
        opened.chmod(0o711)
    daemon.socket_path.chmod(0o666)
    probe = folder / "probe.py"
    probe.write_text(PROBE)
    done = subprocess.run(
        [sys.executable, str(probe), user, str(daemon.socket_path), str(ATTEMPTS)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    uid = pwd.getpwnam(user).pw_uid
    assert json.loads(done.stdout) == {
        "uid": uid,
        "connected": ATTEMPTS,  # the kernel let it connect: the folders were opened up
        "answered": 0,  # not even the server's HTTP/2 settings: nothing was served
        "closed": ATTEMPTS,
    }
    # Another user decides how many refusals there are, not how many log lines: the
    # first is logged at once, the rest are counted into a record a minute at most.
    refusals = daemon.expect_log(msg="refused a caller of another user")
    assert len(refusals) == 1
    assert refusals[0]["caller_uid"] == uid
    with BrokerClient(daemon.socket_path, timeout=10) as mine:
        assert mine.status().caller.uid == os.geteuid()
    assert daemon.alive
