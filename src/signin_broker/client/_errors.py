"""The one exception type apps catch, carrying the daemon's gRPC status and message."""

from __future__ import annotations

import errno
import socket

import grpc

# The daemon's retry hint: in how many seconds a refusal that passes may be asked again.
RETRY_AFTER = "retry-after"


class BrokerError(Exception):
    """A call to the daemon failed: `code` is the gRPC status, `message` the daemon's words.

    `retry_after`: for a refusal that passes (a renewal under way, a state folder that
    cannot be written), the seconds after which to ask again; None when not said.
    """

    def __init__(
        self, code: grpc.StatusCode, message: str, retry_after: float | None = None
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after


class DaemonNotRunning(BrokerError):
    """Nothing serves the socket: the daemon is not running (or not at this path)."""

    def __init__(self, socket_path: str, why_not_started: str = "") -> None:
        super().__init__(
            grpc.StatusCode.UNAVAILABLE,
            f"the signin-broker daemon is not running (nothing serves {socket_path})"
            + (f", and was not started: {why_not_started}" if why_not_started else ""),
        )
        self.socket_path = socket_path


class NotSignedIn(BrokerError):
    """The account has no session: the user must sign in (`signin-broker login`)."""


def translate(error: grpc.RpcError, socket_path: str) -> BrokerError:
    """Turn grpcio's error into a BrokerError, telling a stopped daemon apart."""
    code: grpc.StatusCode = error.code()
    message: str = error.details() or code.name.lower()
    if code == grpc.StatusCode.UNAVAILABLE and not _socket_answers(socket_path):
        return DaemonNotRunning(socket_path)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return NotSignedIn(code, message)
    return BrokerError(code, message, _retry_after(error))


def _retry_after(error: grpc.RpcError) -> float | None:
    """The refusal's retry hint in seconds, if the daemon sent one."""
    trailers = getattr(error, "trailing_metadata", lambda: None)() or ()
    for key, value in trailers:
        if key == RETRY_AFTER and isinstance(value, str) and value.isdigit():
            return float(value)
    return None


def _socket_answers(socket_path: str) -> bool:
    """Whether anything accepts connections on the socket right now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(socket_path)
    except OSError as error:
        return error.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR)
    finally:
        probe.close()
    return True
