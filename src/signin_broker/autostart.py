"""Autostart: a client starts the daemon itself when nothing serves the socket, once.

Where no service manager provides the socket (a container, WSL without systemd, an HPC
node whose ssh sessions have no user manager), the CLI, the bridges and the SDK start
`signin-brokerd` when a connection finds nothing there, as gpg's tools start gpg-agent:
under a lock beside the socket, the socket is tried again once the lock is held (another
caller may have started the daemon meanwhile), then one daemon is started, detached, and
waited for until it serves. However many callers start at once, one daemon starts. It
exits when idle (daemon/idle_exit.py), and the next caller starts it again.

Never where a service manager is expected to own the socket: a systemd user unit for it
with the user's manager running, or a launchd agent. Its socket missing means the
manager's socket is stopped, and a daemon started beside it would take the path from
under the manager; the refusal says so and what to run. SIGNIN_BROKER_AUTOSTART=0 turns
it off: a client then says the daemon is not running, as before.
"""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import time
from socket import AF_UNIX, SOCK_STREAM
from socket import socket as unix_socket

from .locations import AUTOSTART_ENV, AUTOSTARTED_ENV

UNIT = "signin-broker.socket"
LAUNCHD_AGENT = "org.signin-broker.daemon.plist"
LOG_NAME = "signin-brokerd.log"  # beside the socket: what an autostarted daemon logs
STARTS = 5  # a daemon that exits at once (the last one still stopping) is started again
POLL_SECONDS = 0.02


class AutostartRefused(Exception):
    """The daemon is not started here; the message says why and what to do."""


def unavailable(error: OSError) -> bool:
    """Whether a connection failed because nothing serves the socket (autostart may help)."""
    return error.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)


def enabled() -> bool:
    """Whether clients start the daemon (all but with SIGNIN_BROKER_AUTOSTART=0)."""
    return os.environ.get(AUTOSTART_ENV, "") != "0"


def ensure_started(socket_path: str, timeout: float) -> None:
    """Start the daemon on socket_path unless something serves it; return once it serves.

    AutostartRefused where a service manager owns the socket, or the daemon did not
    come up within `timeout` seconds (its log says why).
    """
    owner = service_manager(socket_path)
    if owner:
        raise AutostartRefused(owner)
    folder = os.path.dirname(socket_path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    deadline = time.monotonic() + timeout
    lock = os.open(
        os.path.join(folder, f".{os.path.basename(socket_path)}.start.lock"),
        os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
        0o600,
    )
    try:
        _lock(lock, deadline)
        if not serves(socket_path):
            _start(socket_path, deadline)
    finally:
        os.close(lock)  # the lock goes with it


def serves(socket_path: str) -> bool:
    """Whether a process accepts connections on the socket now."""
    probe = unix_socket(AF_UNIX, SOCK_STREAM)
    try:
        probe.connect(socket_path)
    except OSError as error:
        if unavailable(error):
            return False
        raise
    finally:
        probe.close()
    return True


def service_manager(socket_path: str) -> str:
    """Why a service manager owns the socket ("" when none is expected to)."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        agent = os.path.join(home, "Library", "LaunchAgents", LAUNCHD_AGENT)
        if os.path.exists(agent):
            return (
                f"nothing serves {socket_path}, and launchd's agent {agent} is to start"
                f" the daemon: run `launchctl load {agent}` rather than starting it beside it"
            )
        return ""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if not runtime or not os.path.exists(os.path.join(runtime, "systemd", "private")):
        return ""  # no user manager runs for this user
    for folder in _unit_folders(home):
        if os.path.exists(os.path.join(folder, UNIT)):
            return (
                f"nothing serves {socket_path}, and your systemd user manager is to:"
                f" {UNIT} is installed ({folder}). Start it with `systemctl --user enable"
                f" --now {UNIT}` rather than a daemon beside it"
            )
    return ""


def _unit_folders(home: str) -> list[str]:
    """Where a systemd user manager looks for user units (systemd.unit(5)), in short."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return [
        os.path.join(config, "systemd", "user"),
        os.path.join(data, "systemd", "user"),
        "/etc/systemd/user",
        "/usr/local/lib/systemd/user",
        "/usr/lib/systemd/user",
    ]


def _lock(fd: int, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise AutostartRefused(
                    "another caller is starting the daemon and takes too long"
                ) from None
            time.sleep(POLL_SECONDS)
        else:
            return


def _start(socket_path: str, deadline: float) -> None:
    """Start the daemon detached, again if it exits at once, until it serves."""
    log = os.path.join(os.path.dirname(socket_path), LOG_NAME)
    for _ in range(STARTS):
        pid = _spawn(socket_path, log)
        while time.monotonic() < deadline:
            if serves(socket_path):
                return
            if not _alive(pid):
                break  # the daemon before it still held the socket: try once more
            time.sleep(POLL_SECONDS)
        else:
            break
    raise AutostartRefused(f"signin-brokerd did not come up on {socket_path}; see {log}")


def _spawn(socket_path: str, log: str) -> int:
    """signin-brokerd of this installation, detached (a child of init, not of the caller)."""
    daemon = [sys.executable, "-m", "signin_broker.daemon.main", "--socket", socket_path]
    detached = 'log=$1; shift; "$@" </dev/null >/dev/null 2>>"$log" & echo $!'
    shell = subprocess.run(  # noqa: S603 - our own daemon through sh, its arguments as "$@"
        ["/bin/sh", "-c", detached, "sh", log, *daemon],
        env={**os.environ, AUTOSTARTED_ENV: "1"},
        stdout=subprocess.PIPE,
        start_new_session=True,
        check=True,
        text=True,
    )
    return int(shell.stdout.strip())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
