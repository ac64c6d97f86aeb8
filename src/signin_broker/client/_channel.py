"""What the sync and asyncio clients share: where the daemon is and how to reach it."""

from __future__ import annotations

import os
from typing import Any

import grpc

from ..locations import DEFAULT_TIMEOUT_SECONDS, resolve_socket
from ._errors import DaemonNotRunning, translate

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_TIMEOUT_SECONDS",
    "Attempts",
    "resolve_socket",
    "target",
]
CHANNEL_OPTIONS = (
    # A restarted daemon is found again quickly: the first retry comes after 0.1 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # grpc-core also uses this as the time a connection may take to answer. Under
    # socket activation the first connection waits while the daemon starts (about
    # half a second), so it must not be cut off at the backoff's 0.1 s.
    ("grpc.min_reconnect_backoff_ms", 10_000),
    # A provider's tokens may be megabytes (the daemon takes up to 2 MiB each); grpcio
    # would refuse an answer over 4 MiB.
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
)


def target(socket_path: str) -> str:
    """The grpcio target for a Unix socket path."""
    return f"unix:{os.path.abspath(socket_path)}"  # noqa: PTH100 - pathlib costs the CLI ~7 ms


class Attempts:
    """The tries of one call: the first, and one more where it found no daemon and one was started.

    Nothing serving the socket, a client starts the daemon where autostart may
    (autostart.py), then makes the call once more, waiting for the daemon to serve
    (`wait_for_ready`); any other failure is the call's. The sync and the asyncio
    client each make the calls; when to try again, and how, is decided here:

        attempt = Attempts(socket_path, timeout)
        while True:
            try:
                return call(request, timeout=..., **attempt.options)
            except grpc.RpcError as error:
                attempt.failed(error)  # raises, or has started the daemon
    """

    def __init__(self, socket_path: str, timeout: float) -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.options: dict[str, Any] = {}  # the next try's, beside its timeout

    def failed(self, error: grpc.RpcError) -> None:
        """Raise the call's BrokerError, or start the daemon for one more try (blocking).

        The asyncio client runs this in a worker thread.
        """
        failure = translate(error, self.socket_path)
        if self.options or not isinstance(failure, DaemonNotRunning):
            raise failure from None
        from .. import autostart  # only when nothing serves: it costs a one-shot app ~5 ms

        if not autostart.enabled():
            raise failure from None
        try:
            autostart.ensure_started(self.socket_path, self.timeout)
        except (autostart.AutostartRefused, OSError) as refusal:
            raise DaemonNotRunning(self.socket_path, str(refusal)) from None
        self.options = {"wait_for_ready": True}
