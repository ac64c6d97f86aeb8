"""`signin-broker token` without gRPC: one JSON call on the daemon's socket, standard library only.

The daemon answers unary calls as JSON over HTTP/1.1 on its socket (daemon.api.json_calls),
behind the same kernel check as gRPC. A shell's `$(signin-broker token)` then pays for
Python and this module, not for grpcio and protobuf (about 60 ms here).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

from ..locations import resolve_socket
from ._failures import EXIT_FAILED, complain, not_running, not_signed_in, refused

GET_TOKEN = "/signin_broker.v1.TokenBroker/GetToken"  # noqa: S105 - a path
MAX_ANSWER_BYTES = 1 << 20


def json_call(path: str, method: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    """One HTTP/1.1 POST of `method` on the socket: the status and the body of the answer.

    Written out rather than http.client, which brings in the email parser and ssl
    (about 20 ms); the daemon's answers always carry a Content-Length.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(path)
        head = (
            f"POST {method} HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        connection.sendall(head.encode() + body)
        answer = bytearray()
        while chunk := connection.recv(65536):
            answer += chunk
            if len(answer) > MAX_ANSWER_BYTES:
                raise ValueError("the answer is too large")
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


def token(args: argparse.Namespace) -> int:
    """Ask the daemon for a token and print it (bare, or as JSON with --json)."""
    path = resolve_socket(args.socket)
    request = {
        "account": args.account,
        "scopes": args.scopes,
        "min_ttl_seconds": args.min_ttl,
        "audience": args.audience,
    }
    try:
        status, answer = json_call(path, GET_TOKEN, json.dumps(request).encode(), args.timeout)
        body = json.loads(answer or b"{}")
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
        return not_running(path)
    except (OSError, ValueError, IndexError) as error:
        complain(f"unavailable: the daemon did not answer ({error})")
        return EXIT_FAILED
    if status == 401:
        return not_signed_in(body.get("error", ""))
    if status != 200:
        return refused(body.get("code", "unknown"), body.get("error", ""))
    if args.json:
        issued = {
            "access_token": body.get("access_token", ""),
            "token_type": body.get("token_type", ""),
            "expires_at_unix": int(body.get("expires_at_unix", 0)),
            "scopes": body.get("scopes", []),
            "account": body.get("account", ""),
        }
        json.dump(issued, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(body["access_token"])
    return 0
