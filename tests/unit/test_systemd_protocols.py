"""The sd_listen_fds and sd_notify conventions, read from a given environment."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from signin_broker.daemon.host.systemd import Notifier, listen_fds, watchdog_seconds


def test_sockets_are_taken_only_when_they_are_for_this_process() -> None:
    mine = {"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0", "LISTEN_FDNAMES": "x"}
    assert listen_fds(mine) == []
    assert mine == {}  # read once: a child never thinks the sockets are its own
    assert listen_fds({"LISTEN_PID": "1", "LISTEN_FDS": "1"}) == []
    assert listen_fds({"LISTEN_FDS": "1"}) == []


def test_the_watchdog_interval_is_for_this_process_only() -> None:
    assert watchdog_seconds({"WATCHDOG_USEC": "30000000"}) == 30.0
    assert watchdog_seconds({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}) is None
    mine = {"WATCHDOG_USEC": "500000", "WATCHDOG_PID": str(os.getpid())}
    assert watchdog_seconds(mine) == 0.5
    assert watchdog_seconds({}) is None
    assert watchdog_seconds({"WATCHDOG_USEC": "0"}) is None


def test_notifications_go_to_a_path_or_an_abstract_socket(tmp_path: Path) -> None:
    for address, bind_to in (
        (str(tmp_path / "notify"), str(tmp_path / "notify")),
        ("@sb-test-notify-" + str(os.getpid()), "\0sb-test-notify-" + str(os.getpid())),
    ):
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.bind(bind_to)
        receiver.settimeout(5)
        notifier = Notifier({"NOTIFY_SOCKET": address})
        notifier.send(READY="1", STATUS="serving")
        assert receiver.recv(100) == b"READY=1\nSTATUS=serving"
        notifier.close()
        receiver.close()


def test_without_a_service_manager_nothing_is_sent() -> None:
    notifier = Notifier({})
    assert not notifier.enabled
    notifier.send(READY="1")  # no error
