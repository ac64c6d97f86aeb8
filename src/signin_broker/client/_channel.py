"""What the sync and asyncio clients share: where the daemon is and how to reach it."""

from __future__ import annotations

import os

from ..locations import DEFAULT_TIMEOUT_SECONDS, resolve_socket

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_TIMEOUT_SECONDS",
    "resolve_socket",
    "start_daemon",
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


def start_daemon(socket_path: str, timeout: float) -> None:
    """Start the daemon, as nothing serves its socket (autostart.py); DaemonNotRunning if not.

    Blocking: the asyncio client runs it in a worker thread.
    """
    from .. import autostart  # only when nothing serves: it costs a one-shot app ~5 ms
    from ._errors import DaemonNotRunning

    if not autostart.enabled():
        raise DaemonNotRunning(socket_path)
    try:
        autostart.ensure_started(socket_path, timeout)
    except (autostart.AutostartRefused, OSError) as error:
        raise DaemonNotRunning(socket_path, str(error)) from None
