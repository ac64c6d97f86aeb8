"""Kernel-verified callers: who is calling, and the check that runs before every handler.

grpcio does not give a servicer the connection's socket, so the front listener
(`front.py`) reads the kernel's credentials when it accepts a connection and relays
it to the gRPC server from a socket bound to a fresh, unguessable abstract address.
That address is what grpcio reports as `context.peer()`, and the registry here maps
it back to the caller. The kernel keeps an abstract address unique while it is
bound, and the front listener unregisters it before the socket closes, so no other
process can present a registered address. A connection without a registered address
(for example one made straight to the private gRPC socket) has no identity and is
refused; so is a caller whose uid is not the daemon's.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import psutil

from .peercred import open_peer_pidfd, read_peer_credentials

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Caller:
    """The process behind a connection, as the kernel and /proc describe it."""

    uid: int
    gid: int
    pid: int  # 0 where the platform cannot tell
    executable: str  # "" where it could not be read safely
    connection: int  # the daemon's sequence number of the connection, for logs


def identify_caller(sock: socket.socket, connection: int) -> Caller:
    """Read the caller's kernel credentials and executable from an accepted connection."""
    accepted_at = time.time()
    creds = read_peer_credentials(sock)
    pidfd = open_peer_pidfd(sock)
    try:
        executable = _executable_of(creds.pid, pidfd, accepted_at)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return Caller(creds.uid, creds.gid, creds.pid or 0, executable, connection)


def _executable_of(pid: int | None, pidfd: int | None, accepted_at: float) -> str:
    """The executable of pid, or "" unless it surely belongs to the process that connected.

    The pid could be reused between connect() and this read. A pidfd pins the
    process: if it is still alive after the read, the pid was not reused. Without a
    pidfd, a process created after the connection was accepted cannot be the caller.
    """
    if not pid:
        return ""
    try:
        process = psutil.Process(pid)
        executable = process.exe()
        if pidfd is None and process.create_time() > accepted_at:
            return ""
    except (psutil.Error, OSError):
        return ""
    if pidfd is not None and not _is_alive(pidfd):
        return ""
    return executable


def _is_alive(pidfd: int) -> bool:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but not ours to signal
        return True
    return True


class CallerRegistry:
    """Maps the relay address of each live connection to its verified caller."""

    def __init__(self) -> None:
        self._by_peer: dict[str, Caller] = {}

    def register(self, abstract_name: str, caller: Caller) -> None:
        """Record the caller behind the relay socket bound to abstract_name."""
        self._by_peer[f"unix-abstract:{abstract_name}"] = caller

    def unregister(self, abstract_name: str) -> None:
        """Forget a connection; call before its relay socket closes."""
        self._by_peer.pop(f"unix-abstract:{abstract_name}", None)

    def lookup(self, peer: str) -> Caller | None:
        """The caller for grpcio's `context.peer()`, or None when it is not a relayed connection."""
        return self._by_peer.get(peer)

    def __len__(self) -> int:
        return len(self._by_peer)


_current_caller: contextvars.ContextVar[Caller] = contextvars.ContextVar("caller")


def current_caller() -> Caller:
    """The verified caller of the RPC being served (set by CallerCheckInterceptor)."""
    return _current_caller.get()


Behavior = Callable[..., Any]
Handler = grpc.RpcMethodHandler[Any, Any]


class CallerCheckInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Wraps every handler so that it runs only for a verified caller of the daemon's uid.

    A grpc interceptor cannot see the peer, so the check lives in a wrapper around
    the handler's behavior, where the ServicerContext is available.
    """

    def __init__(self, registry: CallerRegistry, allowed_uid: int) -> None:
        self._registry = registry
        self._allowed_uid = allowed_uid

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        """Return the handler with its behavior wrapped in the caller check."""
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(handler.unary_unary, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        raise NotImplementedError(f"{method}: client-streaming methods are not served")

    async def _admit(self, context: grpc.aio.ServicerContext[Any, Any], method: str) -> Caller:
        caller = self._registry.lookup(context.peer())
        if caller is None:
            log.warning(
                "refused a connection that did not come through the broker socket",
                extra={"method": method, "peer": context.peer()},
            )
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "caller identity unknown: connect through the broker socket",
            )
        if caller.uid != self._allowed_uid:
            log.warning(
                "refused a caller of another user",
                extra={"method": method, "caller_uid": caller.uid, "caller_pid": caller.pid},
            )
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"uid {caller.uid} may not use the broker of uid {self._allowed_uid}",
            )
        return caller

    def _wrap_unary(self, behavior: Behavior, method: str) -> Behavior:
        async def checked(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            _current_caller.set(await self._admit(context, method))
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result

        return checked

    def _wrap_stream(self, behavior: Behavior, method: str) -> Behavior:
        if not inspect.isasyncgenfunction(behavior):  # a coroutine writing with context.write()
            return self._wrap_unary(behavior, method)

        async def checked(
            request: Any, context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            _current_caller.set(await self._admit(context, method))
            async for response in behavior(request, context):
                yield response

        return checked
