"""`signin-broker native-host`: the browsers' native messaging host, relaying to the daemon.

A browser starts it (the program `install-browser` names in its manifests) for an
extension, with the extension's id among the arguments, and speaks on stdin and
stdout: each message a 32-bit length in this machine's byte order, then that many bytes
of UTF-8 JSON. Each request (`getToken`, `signDpopProof`) becomes one JSON call on the
daemon's socket, carrying the web origin the extension names; answers go back with the
request's id. Requests are served side by side (a step-up may wait minutes), a few at
a time.

Who the host speaks for is the daemon's to decide, from the kernel and /proc: its
parent must be a browser the daemon knows, and its arguments name the extension
(daemon/callers/browsers.py); nothing in these messages is identity. A stream that
breaks the protocol (a length over the limit, a message cut short, a message that is
not a JSON object, or one nested deeper than json_depth reads) ends the host with an
error frame: there is no telling where the next message would start.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import threading
from typing import BinaryIO

from ..json_depth import MAX_DEPTH, TooDeep, within_depth
from ..locations import STEP_UP_TIMEOUT_SECONDS, resolve_socket
from ._failures import EXIT_FAILED, HostRefusal, ProtocolError, complain
from ._json_client import GET_TOKEN, SIGN_DPOP_PROOF, NotStarted, json_call

LENGTH = struct.Struct("=I")  # native byte order, as the browsers write it
# What the host reads from the browser: the daemon takes no larger request anyway
# (a browser may declare up to 4 GiB). What it writes: Chrome's limit for a message.
MAX_REQUEST_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 1024 * 1024
MAX_AT_ONCE = 8  # requests being answered at once; more are refused until one ends
# An app whose rule says `ask` waits up to the daemon's ask_timeout_seconds (60).
TIMEOUT_SECONDS = 90.0
# A page's field, the daemon's field, and the field's type, per kind of request.
_COMMON = {
    "account": ("account", str),
    "scopes": ("scopes", list),
    "audience": ("audience", str),
    "minTtlSeconds": ("min_ttl_seconds", int),
}
FIELDS: dict[str, dict[str, tuple[str, type]]] = {
    "getToken": {
        **_COMMON,
        "acrValues": ("acr_values", str),
        "maxAgeSeconds": ("max_age_seconds", int),
        "idToken": ("id_token", bool),
    },
    "signDpopProof": {
        **_COMMON,
        "method": ("method", str),
        "url": ("url", str),
        "nonce": ("nonce", str),
    },
}
CALLS = {"getToken": GET_TOKEN, "signDpopProof": SIGN_DPOP_PROOF}


def add_options(parser: argparse.ArgumentParser) -> None:
    """What the browser passes: the extension (Chromium), or the manifest and extension."""
    parser.add_argument(
        "passed",
        nargs="*",
        metavar="ARGUMENT",
        help="what the browser passes the host: chrome-extension://ID/ (Chromium, Chrome),"
        " or the manifest's path and the extension's id (Firefox); the daemon reads them",
    )


def read_message(stream: BinaryIO) -> dict[str, object] | None:
    """The next message from the browser; None when the stream ends between messages."""
    head = _read_exactly(stream, LENGTH.size)
    if not head:
        return None
    if len(head) < LENGTH.size:
        raise ProtocolError("the stream ended inside a message's length")
    (length,) = LENGTH.unpack(head)
    if length > MAX_REQUEST_BYTES:
        raise ProtocolError(
            f"a message of {length} bytes was announced; a request is at most"
            f" {MAX_REQUEST_BYTES} bytes"
        )
    body = _read_exactly(stream, length)
    if len(body) < length:
        raise ProtocolError(f"the stream ended inside a message ({len(body)} of {length} bytes)")
    try:
        # json's own reader: _json_codec's is for the daemon's answers, and reports a
        # malformed text as a SystemError unless json's Python layer is loaded anyway.
        message = json.loads(within_depth(body.decode("utf-8")))
    except TooDeep:
        raise ProtocolError(f"a message nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        raise ProtocolError("a message is not UTF-8 JSON") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message is not a JSON object")
    return message


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes: fewer only where the stream ends."""
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Answers:
    """The browser's side of stdout: whole messages, one at a time, at most 1 MiB each."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False

    def send(self, message: dict[str, object]) -> None:
        """Write one message; a reader that went away is no one to tell."""
        body = _dumps(message)
        if len(body) > MAX_ANSWER_BYTES:
            body = _dumps(_refusal(message.get("id"), "resource_exhausted", "too large"))
        with self._lock:
            if self._closed:
                return
            try:
                self._stream.write(LENGTH.pack(len(body)) + body)
                self._stream.flush()
            except (BrokenPipeError, ValueError):
                pass

    def close(self, last: dict[str, object]) -> None:
        """Send a last message, and nothing after it (no answer is cut short by the exit)."""
        self.send(last)
        with self._lock:
            self._closed = True


def native_host(args: argparse.Namespace) -> int:
    """Serve the browser's requests until it closes stdin; 1 when the stream breaks the protocol."""
    stdin, answers = sys.stdin.buffer, Answers(sys.stdout.buffer)
    sys.stdout = sys.stderr  # stdout is the browser's: nothing else may write there
    socket_path = resolve_socket(args.socket)
    slots = threading.BoundedSemaphore(MAX_AT_ONCE)
    running: list[threading.Thread] = []
    try:
        while (message := read_message(stdin)) is not None:
            if not slots.acquire(blocking=False):
                answers.send(_refusal(message.get("id"), "resource_exhausted", "too many at once"))
                continue
            thread = threading.Thread(
                target=_serve, args=(message, socket_path, answers, slots), daemon=True
            )
            thread.start()
            running = [*filter(threading.Thread.is_alive, running), thread]
    except ProtocolError as error:
        # The requests under way are dropped: nothing says where the stream would go on.
        answers.close(_refusal(None, "invalid_argument", f"native messaging: {error}"))
        complain(f"native-host: {error}")
        return EXIT_FAILED
    for thread in running:  # a browser may close stdin once it sent its one message
        thread.join()
    return 0


def _serve(
    message: dict[str, object], socket_path: str, answers: Answers, slot: threading.Semaphore
) -> None:
    """Answer one request, whatever happens (the slot is given back)."""
    try:
        answers.send(_answer(message, socket_path))
    finally:
        slot.release()


def _answer(message: dict[str, object], socket_path: str) -> dict[str, object]:
    """The daemon's answer to one request, as the extension reads it."""
    ident = message.get("id")
    try:
        kind, body = _daemon_request(message)
        answer = _ask_daemon(socket_path, kind, body)
        token = _token(kind, answer, bool(body.get("id_token")))
    except HostRefusal as refusal:
        return _refusal(ident, refusal.code, str(refusal))
    except (TypeError, ValueError) as error:
        return _refusal(ident, "invalid_argument", str(error))
    return {"id": ident, "ok": True, "token": token}


def _ask_daemon(socket_path: str, kind: str, body: dict[str, object]) -> dict[str, object]:
    """One JSON call on the daemon's socket: its answer, or HostRefusal."""
    timeout = TIMEOUT_SECONDS
    if body.get("acr_values") or body.get("max_age_seconds") is not None:
        timeout += STEP_UP_TIMEOUT_SECONDS  # the person completes a stronger sign-in
    try:
        status, raw = json_call(socket_path, CALLS[kind], _dumps(body), timeout)
        answer = json.loads(within_depth(raw or b"{}"))
    except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
        raise HostRefusal(
            "unavailable", f"the signin-broker daemon is not running ({socket_path})"
        ) from None
    except NotStarted as refusal:
        raise HostRefusal(
            "unavailable", f"the signin-broker daemon is not running: {refusal}"
        ) from None
    except (OSError, ValueError, IndexError) as error:
        raise HostRefusal(
            "unavailable", f"the signin-broker daemon did not answer ({error})"
        ) from None
    if not isinstance(answer, dict):
        raise HostRefusal("unavailable", "the signin-broker daemon answered garbage")
    if status != 200:
        raise HostRefusal(str(answer.get("code", "unknown")), str(answer.get("error", "")))
    return answer


def _daemon_request(message: dict[str, object]) -> tuple[str, dict[str, object]]:
    """The kind of request and the daemon's JSON body for it; TypeError or ValueError: why not."""
    kind, origin, request = message.get("kind"), message.get("origin"), message.get("request")
    if not isinstance(kind, str) or kind not in FIELDS:
        raise ValueError(f"kind must be one of {', '.join(FIELDS)}")
    if not isinstance(origin, str) or not isinstance(request, dict):
        raise TypeError("a request carries its origin (text) and its fields (an object)")
    body: dict[str, object] = {"origin": origin}
    for name, value in request.items():
        field, kind_of = FIELDS[kind].get(name, ("", type(None)))
        if not field:
            raise ValueError(f"{kind} takes no {str(name)[:40]!r}")
        if not isinstance(value, kind_of) or (kind_of is int and isinstance(value, bool)):
            raise TypeError(f"{name} must be a {kind_of.__name__}")
        if isinstance(value, list) and not all(isinstance(item, str) for item in value):
            raise TypeError(f"{name} must be a list of text")
        body[field] = value
    return kind, body


def _token(kind: str, answer: dict[str, object], id_token: bool) -> dict[str, object]:
    """What a page may have of the daemon's answer (no ID token unless asked, and allowed)."""
    token: dict[str, object] = {
        "accessToken": answer.get("access_token", ""),
        "tokenType": answer.get("token_type", ""),
        "expiresAt": int(str(answer.get("expires_at_unix", 0))),
        "scopes": answer.get("scopes", []),
        "account": answer.get("account", ""),
    }
    if kind == "signDpopProof":
        token["dpop"] = answer.get("dpop", "")
        return token
    token["acr"] = answer.get("acr", "")
    token["authTime"] = int(str(answer.get("auth_time_unix", 0)))
    if id_token:
        token["idToken"] = answer.get("id_token", "")
        token["idTokenExpiresAt"] = int(str(answer.get("id_token_expires_at_unix", 0)))
    return token


def _dumps(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def _refusal(ident: object, code: str, error: str) -> dict[str, object]:
    return {"id": ident, "ok": False, "code": code, "error": error}
