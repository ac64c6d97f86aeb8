"""The one-shot `signin-broker token` in one room: its own line reader, JSON and socket client.

`$(signin-broker token)` runs once per shell command, so its whole budget beyond
Python's own start is about 13 ms. Everything here is there for that, and nothing
else in the CLI does any of it:

- the line is read without argparse and the `re` it imports (about 10 ms), for the
  shapes scripts use, exactly as argparse reads them (read_token_arguments; anything
  else is left to argparse, and tests/unit/test_token_arguments.py holds the two
  readings to the same answers);
- JSON goes through CPython's own C codec (`_json`) without json's Python layer, which
  imports `re` and `enum` (about 7 ms): `loads`, `dumps`, as json reads and writes;
- the token is one HTTP/1.1 JSON call on the daemon's socket (daemon/api/json_calls.py,
  behind the same kernel check as gRPC), written out rather than http.client, which
  brings in the email parser and ssl (about 20 ms), and without grpcio and protobuf
  (about 60 ms): `json_call`, `fetch`;
- nothing imports typing (about 5 ms): the few types mypy needs come in under
  TYPE_CHECKING below, which is not typing's (see signin_broker/__init__.py).

The other commands that run once per use (exec, the git and docker credential helpers,
the browsers' native host) call the daemon through `fetch` and `json_call` too. The
token command's flags for argparse are cli/_options.py's; cli/main.py runs this first.
"""

from __future__ import annotations

import os
import sys
import time
from _json import encode_basestring_ascii, make_encoder, make_scanner
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as unix_socket

from ..json_depth import within_depth
from ..locations import DEFAULT_TIMEOUT_SECONDS, STEP_UP_TIMEOUT_SECONDS, resolve_socket
from ._failures import (
    EXIT_FAILED,
    EXIT_USAGE,
    Refused,
    complain,
    dpop_bound,
    not_running,
    not_signed_in,
    refused,
)

TYPE_CHECKING = False  # not typing's: it would cost the one-shot about 5 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn, Protocol

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
JSON_WHITESPACE = " \t\n\r"


# -- the line, read as argparse reads it ------------------------------------------------------


class TokenArguments:
    """What argparse's namespace holds for `token`, with the same defaults."""

    def __init__(self) -> None:
        self.command = "token"
        self.json = False
        self.socket: str | None = None
        self.timeout = DEFAULT_TIMEOUT_SECONDS
        self.account = ""
        self.scopes: list[str] = []
        self.min_ttl = 0
        self.audience = ""
        self.format = "bare"
        self.id_token = False
        self.env_name = DEFAULT_ENV_NAME
        self.method = ""
        self.url = ""
        self.nonce = ""
        self.acr_values = ""
        self.max_age: int | None = None


def _format(value: str) -> str:
    if value not in FORMATS:
        raise ValueError(value)
    return value


# An option's full name: its attribute, and how its value is read (None: a flag).
GLOBAL_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    "--socket": ("socket", str),
    "--timeout": ("timeout", float),
}
TOKEN_OPTIONS: dict[str, tuple[str, Callable[[str], object] | None]] = {
    **GLOBAL_OPTIONS,
    "--json": ("json", None),
    "--account": ("account", str),
    "--scope": ("scopes", str),  # appended
    "--min-ttl": ("min_ttl", int),
    "--audience": ("audience", str),
    "--format": ("format", _format),
    "--id-token": ("id_token", None),
    "--env-name": ("env_name", str),
    "--method": ("method", str),
    "--url": ("url", str),
    "--nonce": ("nonce", str),
    "--acr-values": ("acr_values", str),
    "--max-age": ("max_age", int),
}


def read_token_arguments(argv: Sequence[str]) -> TokenArguments | None:
    """The `token` command's arguments, or None where argparse must read the line."""
    arguments = TokenArguments()
    options = GLOBAL_OPTIONS
    words = iter(argv)
    for word in words:
        if word == "token" and options is GLOBAL_OPTIONS:
            options = TOKEN_OPTIONS
            continue
        name, equals, value = word.partition("=")
        if name not in options:
            return None
        attribute, read = options[name]
        if read is None:
            if equals:  # argparse: "ignored explicit argument"
                return None
            setattr(arguments, attribute, True)
            continue
        if not equals:
            following = next(words, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        elif value == "--":  # argparse drops a "--" even from `--socket=--`
            return None
        try:
            given = read(value)
        except ValueError:
            return None
        if attribute == "scopes":
            arguments.scopes.append(value)
        else:
            setattr(arguments, attribute, given)
    return arguments if options is TOKEN_OPTIONS else None


# -- JSON, through the C codec alone ---------------------------------------------------------


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _not_serializable(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class _Reading:
    """The settings _json's scanner reads, as json.JSONDecoder() has them by default."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    array_hook = None  # read from Python 3.15 on
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_no_constant)


_scan = make_scanner(_Reading())  # type: ignore[arg-type]  # the stub wants its own type; json passes a decoder too
# As json.dumps makes it: no cycle check (the values are trees), ASCII strings, compact
# separators, keys in their order, no key skipped, no NaN.
_encode = make_encoder(
    None, _not_serializable, encode_basestring_ascii, None, ":", ",", False, False, False
)


def loads(text: str | bytes) -> Any:
    """One JSON value, as json.loads reads it; ValueError when the text is not exactly one.

    A text nested deeper than json_depth reads is a ValueError too, before the scanner sees it.
    """
    if isinstance(text, bytes):
        text = text.decode()
    text = within_depth(text.strip(JSON_WHITESPACE))
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("expecting a JSON value") from None
    except SystemError:
        # The C scanner names what is wrong through json.decoder's JSONDecodeError, and
        # only when json is loaded already; else it fails without an exception. For
        # text that is not JSON (a bad KUBERNETES_EXEC_INFO), json says where.
        import json

        json.loads(text)  # raises JSONDecodeError, a ValueError
        raise ValueError("the text is not JSON") from None
    if end != len(text):
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


def dumps(value: object) -> str:
    """The value as compact ASCII JSON, as json.dumps(value, separators=(",", ":")) writes it."""
    return "".join(_encode(value, 0))


# -- the call on the socket --------------------------------------------------------------------


def shell_name(name: str) -> bool:
    """Whether `name` can be a shell variable: [A-Za-z_][A-Za-z0-9_]* (without `re`: 7 ms)."""
    return name.isascii() and name.isidentifier()


class NotStarted(Exception):
    """Nothing serves the socket, and the daemon was not started there: the message says why."""


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
    """What a tool sends on stdin, bounded (ValueError when it sends more)."""
    given = sys.stdin.buffer.read(limit + 1)
    if len(given) > limit:
        raise ValueError(f"the request is larger than {limit} bytes")
    return given


# -- the command -----------------------------------------------------------------------------


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
