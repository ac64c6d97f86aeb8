"""`signin-broker token` without gRPC: one JSON call on the daemon's socket, standard library only.

The daemon answers unary calls as JSON over HTTP/1.1 on its socket (daemon.api.json_calls),
behind the same kernel check as gRPC. A shell's `$(signin-broker token)` then pays for
Python and this module, not for grpcio and protobuf (about 60 ms here). The other lean
commands (exec, the credential helpers) ask through `fetch` too.
"""

from __future__ import annotations

import os
import sys
import time
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as unix_socket

from ..locations import STEP_UP_TIMEOUT_SECONDS, resolve_socket
from ._failures import (
    EXIT_FAILED,
    EXIT_USAGE,
    complain,
    dpop_bound,
    not_running,
    not_signed_in,
    refused,
)
from ._json_codec import dumps, loads

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    import argparse
    from typing import Any, Protocol

    class TokenRequest(Protocol):
        """What a token is asked with: argparse's Namespace, or the quick reading's."""

        socket: str | None
        timeout: float
        account: str
        scopes: list[str]
        min_ttl: int
        audience: str

    class TokenCommand(TokenRequest, Protocol):
        """The token command's own options besides."""

        json: bool
        format: str
        id_token: bool
        env_name: str
        method: str
        url: str
        nonce: str
        acr_values: str
        max_age: int | None


GET_TOKEN = "/signin_broker.v1.TokenBroker/GetToken"  # noqa: S105 - a path
SIGN_DPOP_PROOF = "/signin_broker.v1.TokenBroker/SignDpopProof"
MAX_ANSWER_BYTES = 16 << 20  # a token may be megabytes (oidc.answers.MAX_TOKEN_CHARS)
# kubectl names the ExecCredential version it wants in KUBERNETES_EXEC_INFO.
EXEC_CREDENTIAL_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


FORMATS = ("bare", "header", "json", "env", "exec-credential", "dpop")
DEFAULT_ENV_NAME = "SIGNIN_BROKER_TOKEN"
HEADER_TOOL = "`--format header` (`--format dpop --method M --url U` can)"


def add_request_options(parser: argparse.ArgumentParser, min_ttl: int = 0) -> None:
    """What a token is asked for with: account, scopes, lifetime left, audience."""
    parser.add_argument(
        "--account",
        default="",
        help="the account: its id, alias, e-mail or login (default: the default account)",
    )
    parser.add_argument(
        "--scope",
        dest="scopes",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope the token must carry; repeat for more",
    )
    parser.add_argument(
        "--min-ttl",
        type=int,
        default=min_ttl,
        metavar="SECONDS",
        help=f"the token must stay valid at least this long (default {min_ttl})",
    )
    parser.add_argument(
        "--audience", default="", metavar="URI", help="the resource the token is for (RFC 8707)"
    )


def add_options(parser: argparse.ArgumentParser) -> None:
    """The token command's options: the request's, then how to print it."""
    add_request_options(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="bare",
        help="bare: the token alone (default); header: an Authorization header line;"
        " json: the token and its details; env: an `export NAME=...` line for eval;"
        " exec-credential: a Kubernetes ExecCredential, for kubectl's exec plugin;"
        " dpop: the Authorization and DPoP header lines of one request (--method, --url)"
        " with a DPoP-bound token (RFC 9449)",
    )
    parser.add_argument(
        "--method", default="", help="--format dpop: the request's HTTP method, such as GET"
    )
    parser.add_argument("--url", default="", help="--format dpop: the request's absolute URL")
    parser.add_argument(
        "--nonce", default="", help="--format dpop: the nonce the server gave (DPoP-Nonce)"
    )
    parser.add_argument(
        "--id-token",
        action="store_true",
        help="the account's ID token instead, where the user allowed this app to have it"
        " (`apps allow APP --id-token`); for kubectl's OIDC set-up",
    )
    parser.add_argument(
        "--env-name",
        default=DEFAULT_ENV_NAME,
        metavar="NAME",
        help=f"the variable --format env sets (default {DEFAULT_ENV_NAME})",
    )
    parser.add_argument(
        "--acr-values",
        default="",
        metavar="VALUES",
        help="step-up (RFC 9470): the sign-in behind the token must have one of these"
        " authentication context classes (space-separated); waits for such a sign-in",
    )
    parser.add_argument(
        "--max-age",
        type=int,
        default=None,
        metavar="SECONDS",
        help="step-up: the person must have authenticated at most this long ago; waits"
        " for such a sign-in",
    )


def shell_name(name: str) -> bool:
    """Whether `name` can be a shell variable: [A-Za-z_][A-Za-z0-9_]* (without `re`: 7 ms)."""
    return name.isascii() and name.isidentifier()


class Refused(Exception):
    """The token could not be had; `status` is the command's exit status (said already)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def json_call(
    path: str, method: str, body: bytes, timeout: float, notice: str = ""
) -> tuple[int, bytes]:
    """One HTTP/1.1 POST of `method` on the socket: the status and the body of the answer.

    Written out rather than http.client, which brings in the email parser and ssl
    (about 20 ms); the daemon's answers always carry a Content-Length. A `notice` is
    said once the daemon has taken a second to answer (it waits for the person).
    """
    connection = unix_socket(AF_UNIX, SOCK_STREAM)  # _socket's: `socket` costs enum
    try:
        connection.settimeout(timeout)
        connection.connect(path)
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
    """What a tool sends on stdin, bounded (ValueError when it sends more)."""
    given = sys.stdin.buffer.read(limit + 1)
    if len(given) > limit:
        raise ValueError(f"the request is larger than {limit} bytes")
    return given


def token(args: TokenCommand) -> int:
    """Ask the daemon for a token and print it in the format asked for."""
    form = "json" if args.json else args.format
    if form == "env" and not shell_name(args.env_name):
        complain(f"--env-name must be a shell variable name, not {args.env_name!r}")
        return EXIT_USAGE
    dpop_status = _dpop_path(args)
    if dpop_status is not None:
        return dpop_status
    version = ""
    if form == "exec-credential":
        try:
            version = exec_credential_version(os.environ.get("KUBERNETES_EXEC_INFO", ""))
        except ValueError as error:
            complain(str(error))
            return EXIT_USAGE
    step_up: dict[str, Any] = {"acr_values": args.acr_values}
    if args.max_age is not None:
        step_up["max_age_seconds"] = args.max_age
    try:
        tool = {"header": HEADER_TOOL, "exec-credential": "kubectl"}.get(form, "")
        issued = fetch(args, tool=tool, id_token=args.id_token, **step_up)
    except Refused as refusal:
        return refusal.status
    secret, expires = _presented(issued, args.id_token)
    if form == "json":
        shown = {
            "access_token": issued.get("access_token", ""),
            "token_type": issued.get("token_type", ""),
            "expires_at_unix": int(str(issued.get("expires_at_unix", 0))),
            "scopes": issued.get("scopes", []),
            "account": issued.get("account", ""),
            "acr": issued.get("acr", ""),
            "auth_time_unix": int(str(issued.get("auth_time_unix", 0))),
        }
        if args.id_token:
            shown |= {"id_token": secret, "id_token_expires_at_unix": expires}
        import json  # indented for people: the C codec writes compact JSON only

        json.dump(shown, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif form == "header":
        print(f"Authorization: Bearer {secret}")
    elif form == "env":
        import shlex

        print(f"export {args.env_name}={shlex.quote(secret)}")
    elif form == "exec-credential":
        print(dumps(exec_credential(version, secret, expires)))
    else:
        print(secret)
    return 0


def _dpop_path(args: TokenCommand) -> int | None:
    """--format dpop's exit status, or a usage error for its options without it; else None."""
    dpop = args.format == "dpop"
    if dpop:
        fits = bool(args.method and args.url) and not (args.id_token or args.acr_values)
        fits = fits and args.max_age is None
    else:
        fits = not (args.method or args.url or args.nonce)
    if not fits:
        complain(
            "--format dpop takes --method and --url (and --nonce), and they go with it only;"
            " it takes no --id-token, --acr-values or --max-age"
        )
        return EXIT_USAGE
    return _dpop_headers(args) if dpop else None


def _dpop_headers(args: TokenCommand) -> int:
    """Print a request's Authorization and DPoP header lines (--json: with the token's details)."""
    try:
        issued = fetch(
            args, call=SIGN_DPOP_PROOF, method=args.method, url=args.url, nonce=args.nonce
        )
    except Refused as refusal:
        return refusal.status
    authorization = f"{issued.get('token_type', '')} {issued.get('access_token', '')}"
    proof = str(issued.get("dpop", ""))
    if args.json:
        print(dumps({**issued, "authorization": authorization}))
        return 0
    print(f"Authorization: {authorization}")
    if proof:
        print(f"DPoP: {proof}")
    return 0


def _presented(issued: dict[str, object], id_token: bool) -> tuple[str, int]:
    """The secret to hand on (the access token, or the ID token) and when it expires."""
    if id_token:
        return str(issued.get("id_token", "")), int(str(issued.get("id_token_expires_at_unix", 0)))
    return str(issued.get("access_token", "")), int(str(issued.get("expires_at_unix", 0)))


def exec_credential_version(exec_info: str) -> str:
    """The ExecCredential apiVersion kubectl asks for (KUBERNETES_EXEC_INFO), v1 by default."""
    if not exec_info:
        return EXEC_CREDENTIAL_VERSIONS[0]
    try:
        asked = loads(exec_info).get("apiVersion", "")
    except (ValueError, AttributeError):
        raise ValueError("KUBERNETES_EXEC_INFO is not a JSON object") from None
    if asked not in EXEC_CREDENTIAL_VERSIONS:
        raise ValueError(
            f"kubectl asks for ExecCredential {asked!r}; this knows"
            f" {' and '.join(EXEC_CREDENTIAL_VERSIONS)}"
        )
    return str(asked)


def exec_credential(version: str, secret: str, expires_at: int) -> dict[str, object]:
    """A Kubernetes ExecCredential carrying the token and its expiry (RFC 3339, UTC)."""
    status: dict[str, object] = {"token": secret}
    if expires_at:
        status["expirationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
    return {"apiVersion": version, "kind": "ExecCredential", "status": status}
