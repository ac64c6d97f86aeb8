"""SIGKILLs with keyrings.alt's PlaintextKeyring as the only keyring lose no session.

That keyring truncates and rewrites its one file for every change: a daemon killed
while it wrote lost every key, and with them the sessions (2 of 8 kills during
keyring writes did; 1 restart found unreadable state). The daemon now keeps its keys
in its own key file there, written atomically.

One session, one stub provider, and SIGNIN_BROKER_TEST_KILLS (default 100) real
daemons on the same state, each forked ready-loaded (support.killing) and killed at
a varied instant: before or after each step of the file writes a start and a renewal
make in the state folder and the keyring's (the k-th, for k = 1, 2, ...), and past
the last one at a random moment after its renewal. Every restart must read its state
(nothing unreadable, rolled back or left unrestored) and serve the session; the only
session that may be lost is one whose refresh the stub completed while the answer was
lost (it rotates refresh tokens and ends the grant when a spent one comes back), and
status must say so.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import time
from pathlib import Path

import grpc

from signin_broker.client import BrokerClient, BrokerError, DaemonNotRunning, SignInState
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from support.killing import DaemonForks
from support.signin import CALLBACK, signed_in_daemon
from support.storage import state_dir
from support.waiting import eventually

KILLS = int(os.environ.get("SIGNIN_BROKER_TEST_KILLS", "100"))
STEPS = 30  # write steps counted into a restart and its renewal: about 25 with the key file
UNREADABLE = {  # what a restart says when it cannot read what the last one left
    "a stored session could not be restored",
    "sessions will not survive a restart",
    "a state file was rolled back",
    "an interrupted save could not be completed; it is tried again at the next start",
    "leftover saves could not be looked at",
    "the keyring could not be read",
}
LOST_IN_FLIGHT = "having completed the renewal whose answer was lost"


def alive(pid: int) -> bool:
    """Whether the fork runs (not ended, nor a zombie its parent has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone while it was read
        return False


def ending(pid: int) -> bool:
    """Whether the fork is gone, or goes within a few seconds."""
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    return not alive(pid)


def listening(socket_path: Path, pid: int) -> bool:
    """Wait until the fork accepts a connection; False when it died first."""
    deadline = time.monotonic() + 30
    while alive(pid):
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(socket_path))
            except OSError:
                assert time.monotonic() < deadline, "the daemon never listened"
                time.sleep(0.005)
                continue
        return True
    return False


def renewed(socket_path: Path, pid: int) -> str:
    """Ask for a renewal once the fork listens: "served", "lost" (sign-in required), or
    "killed" (it died first)."""
    if not listening(socket_path, pid):
        return "killed"
    with BrokerClient(socket_path, timeout=20) as client:
        try:
            client.get_token(refused=True)  # the token was refused: renew now
        except (BrokerError, DaemonNotRunning) as error:
            if isinstance(error, BrokerError) and error.code == grpc.StatusCode.UNAUTHENTICATED:
                return "lost"
            if not ending(pid):  # it resets its connections as it dies, before it is gone
                raise
            return "killed"
    return "served"


def serving(socket_path: Path, pid: int) -> BrokerClient:
    """A client of the fork once it listens."""
    assert listening(socket_path, pid), "the daemon died"
    return BrokerClient(socket_path, timeout=20)


def records(lines: list[str]) -> list[dict[str, object]]:
    found = []
    for line in lines:
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def test_kills_at_every_write_step_with_a_plaintext_keyring_lose_no_session(
    socket_path: Path,
) -> None:
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    keyring = socket_path.parent / "data" / "python_keyring"  # keyrings.alt's, as test daemons
    watched = [state_dir(socket_path), keyring]
    killed_at = {"before": 0, "after": 0, "at random": 0}
    lost_in_flight = 0
    with StubProvider(access_token_ttl=1, refresh_reuse_ends_grant=True) as stub:
        signed_in_daemon(stub, socket_path).stop()
        forks = DaemonForks(socket_path, "--issuer", stub.issuer)
        try:
            reused = len(stub.reuses)
            for kill in range(KILLS):
                when, at = ("before", "after")[kill % 2], 1 + (kill // 2) % STEPS
                detail = f"kill {kill} ({when} write step {at}), seed {seed}"
                mark = len(forks.lines)
                pid = forks.start(watched, when, at)
                outcome = renewed(socket_path, pid)
                if alive(pid):  # past its last write step: killed at a random moment
                    time.sleep(chance.uniform(0, 0.02))
                    when = "at random"
                ended = forks.ended(pid, kill=alive(pid))
                said = records(forks.lines[mark:])
                assert ended == -signal.SIGKILL, f"{detail}: exit {ended}: {said[-3:]}"
                killed_at[when] += 1
                unreadable = [r for r in said if r.get("msg") in UNREADABLE]
                assert not unreadable, f"{detail}: {unreadable}"
                if outcome == "lost":  # only a refresh the stub completed, its answer lost
                    assert len(stub.reuses) > reused, f"{detail}: lost, no reuse at the stub"
                    reused = len(stub.reuses)
                    lost_in_flight += 1
                    sign_in_again(forks, socket_path, detail)
            assert_signed_in_and_nothing_left(forks, socket_path)
        finally:
            forks.close()
    assert killed_at["before"] + killed_at["after"] >= KILLS // 2, killed_at  # at write steps
    assert lost_in_flight <= len(stub.reuses)
    print(f"{KILLS} kills {killed_at}, {lost_in_flight} sessions lost in flight, seed {seed}")


def sign_in_again(forks: DaemonForks, socket_path: Path, detail: str) -> None:
    """After a session lost in flight: status says why, then the person signs in again."""
    mark = len(forks.lines)
    pid = forks.start()
    try:
        with serving(socket_path, pid) as client:
            try:
                client.get_token()
            except BrokerError as error:
                assert error.code == grpc.StatusCode.UNAUTHENTICATED, f"{detail}: {error}"
            status = client.status()
            (ended,) = status.ended_sessions or [None]
            assert ended is not None and LOST_IN_FLIGHT in ended.reason, f"{detail}: {status}"
        ready = eventually(
            lambda: [r for r in records(forks.lines[mark:]) if r.get("msg") == "ready"],
            "the daemon's ready line",
            timeout=10,
            every=0.01,
        )
        web = str(ready[0]["web"]).rstrip("/")
        with Browser() as browser:
            response = browser.follow(browser.get(web + "/user/login"), until=web + CALLBACK)
            browser.get(location(response))
    finally:
        forks.ended(pid, kill=True)


def assert_signed_in_and_nothing_left(forks: DaemonForks, socket_path: Path) -> None:
    """A last start: signed in, its state read whole, and no save's leftover once it stops."""
    pid = forks.start()
    with serving(socket_path, pid) as client:
        client.get_token()
        status = client.status()
    os.kill(pid, signal.SIGTERM)
    assert forks.ended(pid) == 0
    assert status.sign_in_state is SignInState.SIGNED_IN
    assert "ROLLED BACK" not in status.storage
    assert "instead of the keyring" in status.storage  # status says where the keys are
    assert list(state_dir(socket_path).rglob("*.tmp")) == []
