"""How a call reaches its handler: its request read, its access entry applied, refusals mapped.

The service's RPCs are split among servicers, one per concept; each RPC must be served
by exactly one of them and have exactly one entry in the access table (access.py), or
the daemon does not start. Each call, over gRPC here and over JSON in json_calls.py,
goes the same way: a caller the entry leaves out is refused before its request is
read; a request over MAX_REQUEST_BYTES is RESOURCE_EXHAUSTED and one that does not
parse (or ends inside a message) INVALID_ARGUMENT, both without a traceback in the log
(a caller controls them); then, once the sessions are ready (the daemon serves while it
loads them), the entry's app policy check, and only then the handler, given the request
and what the caller was admitted to (access.Admitted). A refusal becomes its gRPC status
(statuses.py); anything unexpected is INTERNAL "internal", its details in the log only.
The stock services beside the API (health, reflection: StockService) have entries in
the same table and read each message through the same bound.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from grpclib.const import Cardinality, Handler, Status
from grpclib.exceptions import GRPCError
from grpclib.server import Stream

from ...session.errors import SessionError
from ..apps.gate import AppGate
from ..callers.identity import Caller
from .access import ACCESS, Access, Guard, guards
from .account_access import Admitted
from .bounds import MAX_REQUEST_BYTES
from .retry_hints import RetryHinted
from .statuses import InvalidRequest, grpc_error
from .transport import active_call, current_caller, current_connection

log = logging.getLogger(__name__)

# What one connection's larger requests may hold at once while their bytes come: each
# call's are acknowledged as read (the receive window opens again), so 100 calls of
# 64 KiB never ended held 6.4 MB. A token request is a few hundred bytes: not counted.
SMALL_REQUEST_BYTES = 1024
MAX_RECEIVING_BYTES = 2 * MAX_REQUEST_BYTES

Unary = Callable[[Any, Admitted], Awaitable[Message]]
Streaming = Callable[[Any, Admitted], AsyncIterator[Message]]


class Rpc:
    """One RPC as both transports call it: its entry, its request type and its handler."""

    __slots__ = ("_behavior", "_guard", "_ready", "name", "request_type")

    def __init__(
        self,
        guard: Guard,
        behavior: Any,
        request_type: type[Message],
        ready: asyncio.Event,
    ) -> None:
        self.name = guard.rpc
        self.request_type = request_type
        self._guard = guard
        self._behavior = behavior
        self._ready = ready

    def refusal(self, caller: Caller) -> GRPCError | None:
        """The refusal of a caller its entry leaves out, before its request is read; else None."""
        return self._guard.refusal(caller)

    async def admitted(self, caller: Caller, request: Message) -> Admitted:
        """The caller admitted by the entry's app policy check, once the sessions are ready."""
        try:
            if not self._ready.is_set():  # only at start-up: no wait on the hot path
                await self._ready.wait()
            return await self._guard.admit(caller, request)
        except (SessionError, InvalidRequest) as error:
            raise grpc_error(error) from None

    async def call(self, caller: Caller, request: Message) -> Message:
        """A unary call's answer: the caller admitted, then the handler; refusals as statuses."""
        admitted = await self.admitted(caller, request)
        try:
            response: Message = await self._behavior(request, admitted)
        except (SessionError, InvalidRequest) as error:
            raise grpc_error(error) from None
        except GRPCError:
            raise
        except Exception:
            log.exception("unexpected error", extra={"method": self.name})
            raise GRPCError(Status.INTERNAL, "internal") from None
        return response

    def stream(self, request: Message, admitted: Admitted) -> AsyncIterator[Message]:
        """A streaming call's answers, for a caller admitted already."""
        answers: AsyncIterator[Message] = self._behavior(request, admitted)
        return answers


class ServiceHandlers:
    """The servicers' methods as grpclib handlers, one per RPC of the service, each guarded.

    `replaced`: unary RPCs served by another behaviour than the servicers' (a forward's
    own GetStatus); their entries stay the table's.
    """

    def __init__(
        self,
        servicers: Sequence[object],
        service: ServiceDescriptor,
        *,
        apps: AppGate,
        ready: asyncio.Event,
        access: Mapping[str, Access] = ACCESS,
        replaced: Mapping[str, Unary] | None = None,
    ) -> None:
        self._made = (servicers, service, apps, ready, access)
        paths = {method.name: f"/{service.full_name}/{method.name}" for method in service.methods}
        checked = guards(paths.values(), apps, access)
        self._mapping: dict[str, Handler] = {}
        self.unary: dict[str, Rpc] = {}  # by path, for json_calls
        for method in service.methods:
            request_type = message_factory.GetMessageClass(method.input_type)
            response_type = message_factory.GetMessageClass(method.output_type)
            behavior = _served_once(servicers, method.name)
            if replaced and method.name in replaced:
                behavior = replaced[method.name]
            path = paths[method.name]
            rpc = Rpc(checked[path], behavior, request_type, ready)
            if method.server_streaming:
                run, cardinality = _streaming(rpc), Cardinality.UNARY_STREAM
            else:
                run, cardinality = _unary(rpc), Cardinality.UNARY_UNARY
                self.unary[path] = rpc
            self._mapping[path] = Handler(run, cardinality, request_type, response_type)

    def __mapping__(self) -> dict[str, Handler]:
        """The handlers by path, as grpclib's Server asks for them."""
        return self._mapping

    def replacing(self, behaviors: Mapping[str, Unary]) -> ServiceHandlers:
        """These handlers with some unary RPCs served by other behaviours, guarded the same."""
        servicers, service, apps, ready, access = self._made
        return ServiceHandlers(
            servicers, service, apps=apps, ready=ready, access=access, replaced=behaviors
        )


class StockService:
    """A stock grpclib service (health, reflection), behind the same table and bound as the API.

    grpclib's own receive reads a message of any length: six health checks of 190 MiB
    took the daemon from 58 MB to 1.6 GB, for an app its policy denies. Here each call
    is refused or admitted by its entry (access.py) before a byte of its request is
    read (a stock request names no web origin to wait for), and each of its messages
    is read as the API's are, bounded and parsed without a traceback.
    """

    def __init__(self, service: Any, apps: AppGate, access: Mapping[str, Access] = ACCESS) -> None:
        served: dict[str, Handler] = service.__mapping__()
        checked = guards(served, apps, access)
        self._mapping = {
            path: handler._replace(func=_stock(handler, checked[path]))
            for path, handler in served.items()
        }

    def __mapping__(self) -> dict[str, Handler]:
        """The guarded handlers by path, as grpclib's Server asks for them."""
        return self._mapping


def _stock(handler: Handler, guard: Guard) -> Callable[[Stream[Any, Any]], Awaitable[None]]:
    """A stock handler behind its entry, reading its messages through the bound."""
    if guard.access.browsers:  # a browser's admission needs its request's origin
        raise TypeError(f"{guard.rpc}: a stock service is not for browser extensions")
    streaming = handler.cardinality.client_streaming

    async def handle(stream: Stream[Any, Any]) -> None:
        caller = current_caller()
        refused = guard.refusal(caller)
        if refused is not None:
            raise refused
        try:
            await guard.admit(caller, None)
        except (SessionError, InvalidRequest) as error:
            raise grpc_error(error) from None
        await handler.func(BoundedStream(stream, handler.request_type, streaming))

    return handle


class BoundedStream:
    """A call's stream as a stock handler reads it: each message through the bound.

    Sending, metadata and the rest are grpclib's stream's own.
    """

    def __init__(
        self, stream: Stream[Any, Any], request_type: type[Message], streaming: bool
    ) -> None:
        self._stream = stream
        self._request_type = request_type
        self._streaming = streaming  # a stream of requests may end; a single request must come

    async def recv_message(self) -> Message | None:
        """The next message, or None where a stream of requests ended."""
        request = await _next_message(self._stream, self._request_type)
        return request if self._streaming else _required(request)

    def __aiter__(self) -> BoundedStream:
        return self

    async def __anext__(self) -> Message:
        message = await self.recv_message()
        if message is None:
            raise StopAsyncIteration
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _unary(rpc: Rpc) -> Callable[[Stream[Any, Any]], Awaitable[None]]:
    """A grpclib handler that serves a unary RPC: the caller checked, the request read, answered."""

    async def handle(stream: Stream[Any, Any]) -> None:
        caller = current_caller()
        refused = rpc.refusal(caller)
        if refused is not None:
            raise refused
        request = _required(await _next_message(stream, rpc.request_type))
        with active_call():
            try:
                response = await rpc.call(caller, request)
            except RetryHinted as refusal:  # grpclib's own would drop the hint
                await stream.send_trailing_metadata(
                    status=refusal.status,
                    status_message=refusal.message,
                    metadata=refusal.trailer(),
                )
                return
        await stream.send_message(response)

    return handle


def _streaming(rpc: Rpc) -> Callable[[Stream[Any, Any]], Awaitable[None]]:
    async def handle(stream: Stream[Any, Any]) -> None:
        caller = current_caller()
        refused = rpc.refusal(caller)
        if refused is not None:
            raise refused
        request = _required(await _next_message(stream, rpc.request_type))
        with active_call():
            admitted = await rpc.admitted(caller, request)
            async for response in rpc.stream(request, admitted):
                await stream.send_message(response)

    return handle


def _required(request: Message | None) -> Message:
    """The one request message of a call; INVALID_ARGUMENT when its requests ended without it."""
    if request is None:
        raise GRPCError(Status.INVALID_ARGUMENT, "the request has no message")
    return request


async def _next_message(stream: Stream[Any, Any], request_type: type[Message]) -> Message | None:
    """A call's next request message, bounded in size, parsed or refused; None at their end."""
    h2_stream = stream._stream  # grpclib's own receive reads a message of any length
    try:
        prefix = await h2_stream.recv_data(5)
        if not prefix:
            return None
        compressed, size = struct.unpack(">?I", prefix)
        if compressed:
            raise GRPCError(Status.UNIMPLEMENTED, "compressed requests are not supported")
        if size > MAX_REQUEST_BYTES:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED, f"the request is larger than {MAX_REQUEST_BYTES} bytes"
            )
        if size <= SMALL_REQUEST_BYTES:
            body = await h2_stream.recv_data(size)
        else:
            body = await _counted(h2_stream, size)
    except AssertionError:  # grpclib's word for a stream that ended inside a message
        raise GRPCError(Status.INVALID_ARGUMENT, "the request ends inside a message") from None
    request = request_type()
    try:
        request.ParseFromString(body)
    except DecodeError:
        log.debug("refused a request that does not parse", extra={"type": request_type.__name__})
        raise GRPCError(
            Status.INVALID_ARGUMENT, f"the request is not a valid {request_type.__name__}"
        ) from None
    return request


async def _counted(h2_stream: Any, size: int) -> bytes:
    """A larger request's bytes, counted against its connection's MAX_RECEIVING_BYTES."""
    connection = current_connection()
    if connection.receiving + size > MAX_RECEIVING_BYTES:
        raise GRPCError(
            Status.RESOURCE_EXHAUSTED,
            f"more than {MAX_RECEIVING_BYTES} bytes of requests come at once on this connection",
        )
    connection.receiving += size
    try:
        body: bytes = await h2_stream.recv_data(size)
    finally:
        connection.receiving -= size
    return body


def _served_once(servicers: Sequence[object], name: str) -> Any:
    """The one servicer method of this name; a missing or doubled one is a bug at start."""
    found = [getattr(servicer, name) for servicer in servicers if hasattr(servicer, name)]
    if len(found) != 1:
        raise TypeError(f"{name} is served by {len(found)} servicers, not 1")
    return found[0]
