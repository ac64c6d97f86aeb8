r"""Unary calls as JSON over HTTP/1.1 on the same socket, for curl and for tools without gRPC.

The shape is the Connect protocol's and Docker's API's: `POST /<service>/<method>` with
a JSON body, `Content-Type: application/json`, answered with the response message in
protobuf's own JSON mapping (field names as in the .proto). It is served beside gRPC
on the one listener, on the connection the kernel check already admitted: the caller
is the same, and so are the RPC's access entry (access.py), its handler and its audit
rows (dispatch.Rpc serves both transports). A failed
call answers the HTTP status of its gRPC status with `{"error": <message>, "code":
<status>}`. Streaming methods (WatchEvents) stay gRPC's.

    curl --unix-socket "$XDG_RUNTIME_DIR/signin-broker/broker.sock" -d '{}' -H \
    'Content-Type: application/json' http://broker/signin_broker.v1.TokenBroker/GetToken
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

import h11
from google.protobuf import json_format
from google.protobuf.message import Message
from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ...json_depth import within_depth
from ..callers.identity import Caller
from .bounds import MAX_REQUEST_BYTES
from .retry_hints import RetryHinted

log = logging.getLogger(__name__)

MAX_BODY_BYTES = MAX_REQUEST_BYTES  # as for gRPC requests
MAX_HEAD_BYTES = 16 * 1024
# After a refusal, how long and how much more the caller may go on sending before the
# close: closing on a request still coming fails the caller's next send (EPIPE) before
# it reads the refusal, and curl then says "failed sending data" instead of 413.
LINGER_SECONDS = 2.0
LINGER_BYTES = MAX_HEAD_BYTES + MAX_BODY_BYTES
JSON = "application/json"

# The HTTP status of each gRPC status (Connect's mapping; the contract's
# own where it names one, docs/contract.md §16).
HTTP_STATUS = {
    Status.INVALID_ARGUMENT: 400,
    Status.FAILED_PRECONDITION: 400,
    Status.OUT_OF_RANGE: 400,
    Status.UNAUTHENTICATED: 401,
    Status.PERMISSION_DENIED: 403,
    Status.NOT_FOUND: 404,
    Status.ALREADY_EXISTS: 409,
    Status.ABORTED: 409,
    Status.RESOURCE_EXHAUSTED: 429,
    Status.CANCELLED: 499,
    Status.UNIMPLEMENTED: 501,
    Status.UNAVAILABLE: 503,
    Status.DEADLINE_EXCEEDED: 504,
}


class UnaryRpc(Protocol):
    """A unary RPC as dispatch.Rpc serves it: its entry's refusal, its request type, its answer."""

    request_type: type[Message]

    def refusal(self, caller: Caller) -> GRPCError | None: ...

    async def call(self, caller: Caller, request: Message) -> Message: ...


class Answer(NamedTuple):
    """A call's HTTP status and JSON body, and for a refusal that passes, when to ask again."""

    status: int
    body: bytes
    retry_after: int = 0


class JsonCalls:
    """The unary RPCs of the service, by path.

    A caller the RPC's access entry leaves out (a forward, a browser extension) is
    refused on the request's head, before its body is read (JsonConnection asks
    `refusal`), so a body that does not parse, or is too long, or never comes, is
    still PERMISSION_DENIED, as over gRPC, never INVALID_ARGUMENT.
    """

    def __init__(self, rpcs: Mapping[str, UnaryRpc]) -> None:
        self._rpcs = dict(rpcs)

    def refusal(self, path: str, caller: Caller) -> Answer | None:
        """The answer to a call refused on its head: no such method, or not for this caller."""
        rpc = self._rpcs.get(path)
        if rpc is None:
            return _error(Status.NOT_FOUND, f"no unary method {path!r} (streams are gRPC only)")
        refused = rpc.refusal(caller)
        if refused is not None:
            return _error(refused.status, refused.message or "")
        return None

    async def answer(self, path: str, content_type: str, body: bytes, caller: Caller) -> Answer:
        """The HTTP status and JSON body that answer one call."""
        refused = self.refusal(path, caller)
        if refused is not None:
            return refused
        rpc = self._rpcs[path]
        if content_type.split(";", maxsplit=1)[0].strip().lower() != JSON:
            return _error(Status.INVALID_ARGUMENT, f"the body must be {JSON}")
        request = rpc.request_type()
        try:
            json_format.Parse(within_depth(body or b"{}"), request)
        except (json_format.ParseError, ValueError) as error:  # json_depth.TooDeep included
            message = str(error).splitlines()[0][:200]
            what = f"the body is not a {rpc.request_type.__name__}: {message}"
            return _error(Status.INVALID_ARGUMENT, what)
        return await _called(rpc, caller, request)


async def _called(rpc: UnaryRpc, caller: Caller, request: Message) -> Answer:
    """The HTTP status and JSON body of the call's answer or refusal."""
    try:
        response = await rpc.call(caller, request)
    except RetryHinted as error:
        return _error(error.status, error.message or "", error.retry_after)
    except GRPCError as error:
        return _error(error.status, error.message or error.status.name.lower())
    text = json_format.MessageToJson(
        response, preserving_proto_field_name=True, indent=None, ensure_ascii=True
    )
    return Answer(200, text.encode())


def _error(status: Status, message: str, retry_after: int = 0) -> Answer:
    """The HTTP status and body of a refusal: {"error": <message>, "code": <status>}.

    A refusal that passes says when to ask again (`retry_after_seconds`; the
    Retry-After header repeats it).
    """
    body: dict[str, object] = {"error": message, "code": status.name.lower()}
    if retry_after:
        body["retry_after_seconds"] = retry_after
    return Answer(HTTP_STATUS.get(status, 500), json.dumps(body).encode(), retry_after)


class JsonConnection:
    """One HTTP/1.1 connection: requests in turn, each answered before the next is read."""

    def __init__(
        self,
        transport: asyncio.Transport,
        calls: JsonCalls,
        on_call: Callable[[], contextlib.AbstractContextManager[None]],
        caller: Caller,
    ) -> None:
        self._transport = transport
        self._calls = calls
        self._caller = caller
        self._on_call = on_call  # counts the call as active on its connection
        self._http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._request: h11.Request | None = None
        self._body = bytearray()
        self._busy = False
        self._waiting = 0  # bytes sent ahead while a call is answered
        self._task: asyncio.Task[None] | None = None  # the call being answered
        self._lingering = -1  # after a refusal: bytes the caller may still send; else -1

    def data_received(self, data: bytes) -> None:
        """Feed bytes; start answering a request once it is whole."""
        if self._lingering >= 0:  # refused: what still comes is dropped unread
            self._lingering -= len(data)
            if self._lingering < 0:
                self._transport.close()
            return
        if self._busy:
            self._waiting += len(data)
            if self._waiting > MAX_HEAD_BYTES + MAX_BODY_BYTES:  # more than one request ahead
                self._transport.close()
                return
        self._http.receive_data(data)
        self._next()

    def connection_lost(self) -> None:
        """The caller left: nothing more is read."""
        self._transport.close()

    def _next(self) -> None:
        while not self._busy:
            try:
                event = self._http.next_event()
            except h11.RemoteProtocolError as error:
                self._refuse(_invalid(error.error_status_hint, "the request is not valid HTTP/1.1"))
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                if not self._start(event):
                    return
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > MAX_BODY_BYTES:
                    self._refuse(_invalid(413, f"the body is larger than {MAX_BODY_BYTES} bytes"))
                    return
            elif isinstance(event, h11.EndOfMessage):
                self._busy, self._waiting = True, 0
                self._task = asyncio.get_running_loop().create_task(self._answer())
            elif isinstance(event, h11.ConnectionClosed):
                self._transport.close()
                return

    def _start(self, request: h11.Request) -> bool:
        """Take a request's head; False when it was refused (and the connection closed)."""
        if request.method != b"POST":
            self._refuse(_invalid(405, "calls are POST /<service>/<method> with a JSON body"))
            return False
        refused = self._calls.refusal(_path_of(request), self._caller)
        if refused is not None:
            self._refuse(refused)
            return False
        length = dict(request.headers).get(b"content-length", b"0")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            self._refuse(_invalid(413, f"the body is larger than {MAX_BODY_BYTES} bytes"))
            return False
        self._request, self._body = request, bytearray()
        return True

    async def _answer(self) -> None:
        request = self._request
        assert request is not None  # noqa: S101 - set by _start before its body
        content_type = dict(request.headers).get(b"content-type", b"").decode("latin-1")
        path = _path_of(request)
        try:
            with self._on_call():
                answer = await self._calls.answer(
                    path, content_type, bytes(self._body), self._caller
                )
        except Exception:
            log.exception("unexpected error in a JSON call", extra={"path": path[:100]})
            answer = _error(Status.INTERNAL, "internal")
        if self._transport.is_closing():
            return
        self._send(*answer)
        if self._http.our_state is h11.MUST_CLOSE:
            self._transport.close()
            return
        self._http.start_next_cycle()
        self._busy = False
        self._next()

    def _send(self, status: int, body: bytes, retry_after: int = 0) -> None:
        headers = [(b"content-type", JSON.encode()), (b"content-length", str(len(body)).encode())]
        if retry_after:
            headers.append((b"retry-after", str(retry_after).encode()))
        self._transport.write(self._http.send(h11.Response(status_code=status, headers=headers)))
        self._transport.write(self._http.send(h11.Data(data=body)))
        self._transport.write(self._http.send(h11.EndOfMessage()))

    def _refuse(self, answer: Answer) -> None:
        """Answer a request refused unread, and close: the connection cannot be trusted to resync.

        The answer goes first, with the end of what the daemon sends; the close follows
        when the caller stops sending, or after LINGER_SECONDS or LINGER_BYTES more. What
        the caller sent with the refused head (up to 256 KiB a read) is let go at once.
        """
        log.debug("refused a JSON call", extra={"status": answer.status, "answer": answer.body})
        if self._http.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                self._send(*answer)
        self._http, self._body = h11.Connection(h11.SERVER), bytearray()  # nothing more is read
        if not self._transport.can_write_eof():
            self._transport.close()
            return
        self._lingering = LINGER_BYTES
        self._transport.write_eof()
        asyncio.get_running_loop().call_later(LINGER_SECONDS, self._transport.close)


def _invalid(status: int, message: str) -> Answer:
    """A request refused for its form, with an HTTP status of its own (405, 413)."""
    return Answer(status, _error(Status.INVALID_ARGUMENT, message).body)


def _path_of(request: h11.Request) -> str:
    return request.target.decode("latin-1").split("?")[0]
