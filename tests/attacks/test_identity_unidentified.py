"""A caller that is gone before the daemon looks must not get the default.

A process connects and exits at once, leaving the connection to a forked child. The
kernel's credentials name the parent, whose executable can no longer be read, so the
daemon cannot tell which program is calling. Before the fix such a caller got the
default for new apps ("allow"), which a denied app used to get tokens. Here the
daemon is paused (SIGSTOP) while the parents connect and exit, so that every one of
them is gone by the time it looks.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from signin_broker_testing import StubProvider
from support.apps import write_policy
from support.identity import RELAY, Script, wait_for_files
from support.signin import signed_in_daemon

ROUNDS = 20

# The parent connects and exits; the child keeps the socket, waits for the parent to be
# gone, and speaks gRPC over it (through the relay), then reports the outcome.
ORPHAN = r"""
import sys, time

socket_path, relay_dir, result = sys.argv[1:4]
inherited = socket.socket(socket.AF_UNIX)
inherited.connect(socket_path)
parent = os.getpid()
if os.fork():
    os._exit(0)
deadline = time.monotonic() + 30
while os.getppid() == parent and time.monotonic() < deadline:
    time.sleep(0.01)
report(result, call(relay(inherited, relay_dir)))
"""


def test_a_caller_that_exits_before_the_daemon_looks_is_refused_despite_new_apps_allow(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "allow")
    orphan = Script(folder / "apps", "orphan", RELAY + ORPHAN)
    write_policy(socket_path, orphan.rule("deny"))  # the deny rule it would evade
    relays, results = folder / "relays", folder / "results"
    relays.mkdir()
    results.mkdir()
    paths = [results / f"{round_}.json" for round_ in range(ROUNDS)]
    daemon.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        parents = [
            orphan.start(str(socket_path), str(relays), str(path), stdout=subprocess.DEVNULL)
            for path in paths
        ]
        for parent in parents:
            parent.wait(timeout=30)  # exited and reaped: its pid names no process now
            assert parent.returncode == 0, parent.stderr.read() if parent.stderr else ""
    finally:
        daemon.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    outcomes = [outcome for (outcome,) in wait_for_files(paths)]
    assert all(outcome["code"] == "PERMISSION_DENIED" for outcome in outcomes), outcomes
    assert not [outcome for outcome in outcomes if outcome.get("token")]
    assert all("could not tell which program" in o["message"] for o in outcomes), outcomes
    # A caller that stays until the daemon looks is identified, and the default applies.
    (alive,) = Script(folder / "apps", "alive", RELAY + ALIVE).run(str(socket_path), str(relays))
    assert alive == {"code": "OK", "token": True}
    assert daemon.alive
    daemon.stop()


ALIVE = r"""
import sys

socket_path, relay_dir = sys.argv[1:3]
own = socket.socket(socket.AF_UNIX)
own.connect(socket_path)
print(json.dumps(call(relay(own, relay_dir))))
"""
