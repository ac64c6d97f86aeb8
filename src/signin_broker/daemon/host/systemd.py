"""The few lines of systemd's protocols a service needs: inherited sockets and sd_notify.

Socket activation (sd_listen_fds(3)): systemd passes listening sockets from fd 3 on,
with LISTEN_PID naming the process they are for and LISTEN_FDS how many. Readiness
and the watchdog (sd_notify(3)): one datagram of `KEY=value` lines to the socket in
NOTIFY_SOCKET, a path or, with a leading "@", an abstract name. No libsystemd: the
protocols are stable and this is all of them the daemon uses (gunicorn does the same).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, MutableMapping

log = logging.getLogger(__name__)

SD_LISTEN_FDS_START = 3


def listen_fds(environ: MutableMapping[str, str] | None = None) -> list[int]:
    """The descriptors systemd passed to this process; the variables are removed after reading.

    They are removed (as sd_listen_fds(unset=1) does) so a child never believes the
    sockets are for it.
    """
    env = os.environ if environ is None else environ
    pid, count = env.pop("LISTEN_PID", ""), env.pop("LISTEN_FDS", "")
    env.pop("LISTEN_FDNAMES", None)
    if not pid.isdigit() or int(pid) != os.getpid() or not count.isdigit():
        return []
    fds = list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + int(count)))
    for fd in fds:
        os.set_inheritable(fd, False)
    return fds


def watchdog_seconds(environ: Mapping[str, str] | None = None) -> float | None:
    """How often systemd expects WATCHDOG=1, or None when no watchdog is set for us."""
    env = os.environ if environ is None else environ
    usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and (not pid.isdigit() or int(pid) != os.getpid()):
        return None
    return int(usec) / 1_000_000


class Notifier:
    """Sends sd_notify messages to the service manager; does nothing when there is none."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        if self._address:
            self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        """Whether a service manager listens."""
        return self._socket is not None

    def send(self, **fields: str) -> None:
        """Send the fields as KEY=value lines in one datagram (READY, STATUS, WATCHDOG...)."""
        if self._socket is None:
            return
        message = "\n".join(f"{key}={value}" for key, value in fields.items())
        try:
            self._socket.sendto(message.encode(), self._address)
        except OSError as error:
            log.warning("the service manager cannot be notified", extra={"reason": str(error)})

    def close(self) -> None:
        """Close the notification socket."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
