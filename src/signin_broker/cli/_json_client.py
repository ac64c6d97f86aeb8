"""The CLI's lean client of the daemon: one HTTP/1.1 JSON call on its socket, written out.

The commands that run once per use (token, exec, the git and docker credential helpers,
the browsers' native host) call the daemon here, on the JSON path of its one socket
(daemon/api/json_calls.py, behind the same kernel check as gRPC), rather than through
the SDK: grpcio and protobuf cost a one-shot about 60 ms, and http.client, which brings
in the email parser and ssl, about 20 ms. The socket is _socket's (`socket` costs enum),
and JSON the codec's (_json_codec.py). Where nothing serves the socket, the daemon is
started first (autostart.py), as the SDK does.
"""

from __future__ import annotations

import sys
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as unix_socket

from ..locations import STEP_UP_TIMEOUT_SECONDS, resolve_socket
from ._failures import (
    EXIT_FAILED,
    Refused,
    complain,
    dpop_bound,
    not_running,
    not_signed_in,
    refused,
)
from ._json_codec import dumps, loads

TYPE_CHECKING = False  # not typing's: it would cost the one-shot about 5 ms
if TYPE_CHECKING:
    from typing import Protocol

    class TokenRequest(Protocol):
        """What a token is asked with: argparse's Namespace, or the one-shot's reading."""

        socket: str | None
        timeout: float
        account: str
        scopes: list[str]
        min_ttl: int
        audience: str


GET_TOKEN = "/signin_broker.v1.TokenBroker/GetToken"  # noqa: S105 - a path
SIGN_DPOP_PROOF = "/signin_broker.v1.TokenBroker/SignDpopProof"
MAX_ANSWER_BYTES = 16 << 20  # a token may be megabytes (oidc.answers.MAX_TOKEN_CHARS)


class NotStarted(Exception):
    """Nothing serves the socket, and the daemon was not started there: the message says why."""


def json_call(
    path: str, method: str, body: bytes, timeout: float, notice: str = ""
) -> tuple[int, bytes]:
    """One HTTP/1.1 POST of `method` on the socket: the status and the body of the answer.

    The daemon's answers always carry a Content-Length. A `notice` is said once the
    daemon has taken a second to answer (it waits for the person).
    """
    connection = unix_socket(AF_UNIX, SOCK_STREAM)
    try:
        connection.settimeout(timeout)
        _connect(connection, path, timeout)
        head = (
            f"POST {method} HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        connection.sendall(head.encode() + body)
        answer = bytearray()
        if notice:
            connection.settimeout(min(1.0, timeout))
        while True:
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                if not notice or answer:
                    raise
                complain(notice)
                notice = ""
                connection.settimeout(timeout)
                continue
            if not chunk:
                break
            answer += chunk
            if len(answer) > MAX_ANSWER_BYTES:
                raise ValueError("the answer is too large")
    finally:
        connection.close()
    head_bytes, _, rest = bytes(answer).partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        (
            int(line.split(":", 1)[1])
            for line in lines[1:]
            if line.lower().startswith("content-length:")
        ),
        len(rest),
    )
    return status, rest[:length]


def _connect(connection: unix_socket, path: str, timeout: float) -> None:
    """Connect; where nothing serves the socket, start the daemon (autostart.py) first."""
    try:
        connection.connect(path)
    except OSError as error:
        from .. import autostart  # only when nothing serves: subprocess costs ~5 ms

        if not autostart.unavailable(error) or not autostart.enabled():
            raise
        try:
            autostart.ensure_started(path, timeout)
        except autostart.AutostartRefused as refusal:
            raise NotStarted(str(refusal)) from None
        connection.connect(path)


def fetch(
    args: TokenRequest, *, tool: str = "", call: str = GET_TOKEN, **request: object
) -> dict[str, object]:
    """GetToken (or `call`) with the command's options and these fields; Refused says why not.

    `tool`: what the token is for, which cannot send a DPoP-bound one (Refused then).
    """
    path = resolve_socket(args.socket)
    body = {
        "account": args.account,
        "scopes": args.scopes,
        "min_ttl_seconds": args.min_ttl,
        "audience": args.audience,
        **request,
    }
    timeout, notice = args.timeout, ""
    if body.get("acr_values") or body.get("max_age_seconds") is not None:  # a step-up
        timeout += STEP_UP_TIMEOUT_SECONDS
        notice = (
            "waiting for a stronger sign-in: complete it in the browser (`signin-broker"
            " login` opens it; a notification and the loopback page say where)"
        )
    try:
        status, answer = json_call(path, call, dumps(body).encode(), timeout, notice)
        issued = loads(answer or b"{}")
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
        raise Refused(not_running(path)) from None
    except NotStarted as refusal:
        raise Refused(not_running(path, str(refusal))) from None
    except (OSError, ValueError, IndexError) as error:
        complain(f"unavailable: the daemon did not answer ({error})")
        raise Refused(EXIT_FAILED) from None
    if status == 401:
        raise Refused(not_signed_in(issued.get("error", "")))
    if status != 200:
        raise Refused(refused(issued.get("code", "unknown"), issued.get("error", "")))
    if tool and str(issued.get("token_type", "")).lower() == "dpop":
        raise Refused(dpop_bound(tool, str(issued.get("dpop_bound_by", ""))))
    return dict(issued)


def renew(args: TokenRequest) -> None:
    """Tell the daemon a server refused its token, so the next fetch brings a renewed one.

    The daemon renews at most once a quarter of the token's lifetime for refusals.
    """
    fetch(args, refused=True)


def read_input(limit: int = 64 * 1024) -> bytes:
    """What a credential helper's tool sends on stdin, bounded (ValueError when it sends more)."""
    given = sys.stdin.buffer.read(limit + 1)
    if len(given) > limit:
        raise ValueError(f"the request is larger than {limit} bytes")
    return given
