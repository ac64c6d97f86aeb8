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
import re
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeAlias

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
    script: str = ""  # what an interpreter runs (see script_of); "" for a native program

    @property
    def app(self) -> str:
        """The app's identity for policy and audit: the executable, plus the script it runs."""
        return f"{self.executable} {self.script}" if self.script else self.executable


def identify_caller(sock: socket.socket, connection: int) -> Caller:
    """Read the caller's kernel credentials and executable from an accepted connection."""
    accepted_at = time.time()
    creds = read_peer_credentials(sock)
    pidfd = open_peer_pidfd(sock)
    try:
        executable, script = _program_of(creds.pid, pidfd, accepted_at)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return Caller(creds.uid, creds.gid, creds.pid or 0, executable, connection, script)


def _program_of(pid: int | None, pidfd: int | None, accepted_at: float) -> tuple[str, str]:
    """The executable and script of pid, or ("", "") unless pid surely is the caller.

    The pid could be reused between connect() and this read. A pidfd pins the
    process: if it is still alive after the read, the pid was not reused. Without a
    pidfd, a process created after the connection was accepted cannot be the caller.
    """
    if not pid:
        return "", ""
    try:
        process = psutil.Process(pid)
        executable = process.exe()
        script = ""
        if INTERPRETER.fullmatch(Path(executable).name):
            script = script_of(process.cmdline(), process.cwd())
        if pidfd is None and process.create_time() > accepted_at:
            return "", ""
    except (psutil.Error, OSError):
        return "", ""
    if pidfd is not None and not _is_alive(pidfd):
        return "", ""
    return executable, script


# Programs that run someone else's code: the app is the script, not the interpreter.
INTERPRETER = re.compile(
    r"(python|pypy|node|nodejs|perl|ruby|php|lua|gjs|bash|sh|dash|zsh|ksh)[0-9.]*"
)
# Options of these interpreters that take the next argument as their value.
_OPTIONS_WITH_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs", "-r", "--require"})


def script_of(cmdline: Sequence[str], cwd: str) -> str:
    """The script an interpreter's command line runs: an absolute path, or "-m module".

    The command line is what the process says about itself, unlike the executable,
    which the kernel reports; policy keyed on it separates well-behaved apps that
    share an interpreter, and is no defence against code already running as the user.
    Inline code (-c, -e) has no script and so is identified by the interpreter alone.
    """
    arguments = iter(cmdline[1:])
    for argument in arguments:
        if argument in ("-c", "-e", "--eval", "-"):
            return ""
        if argument == "-m":
            return f"-m {next(arguments, '')}".rstrip()
        if argument.startswith("-m") and not argument.startswith("--"):
            return f"-m {argument[2:]}"
        if argument in _OPTIONS_WITH_VALUE:
            next(arguments, None)
        elif not argument.startswith("-"):
            return os.path.normpath(Path(cwd, argument))
    return ""


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
    """The verified caller of the RPC being served (set by CallerCheck)."""
    return _current_caller.get()


Behavior = Callable[..., Any]
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"  # generic only to the type checker
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
GenericHandler: TypeAlias = grpc.GenericRpcHandler


class CallerCheck:
    """Wraps handlers so that each runs only for a verified caller of the daemon's uid.

    A grpc interceptor cannot see the peer and costs a coroutine and a new handler on
    every call, so the check is instead wrapped around each handler's behavior once,
    when the service is registered (see CheckedRegistration); the ServicerContext,
    which knows the peer, is at hand there.
    """

    def __init__(self, registry: CallerRegistry, allowed_uid: int) -> None:
        self._registry = registry
        self._allowed_uid = allowed_uid

    def wrap(self, handler: Handler, method: str) -> Handler:
        """The same handler with its behavior, whatever its kind, checked first."""
        for kind, make_handler in _HANDLER_KINDS:
            behavior = getattr(handler, kind)
            if behavior is not None:
                return make_handler(
                    self._wrap_behavior(behavior, method),
                    request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer,
                )
        raise ValueError(f"{method}: a handler without a behavior")

    def _wrap_behavior(self, behavior: Behavior, method: str) -> Behavior:
        """The same kind of callable as behavior (coroutine or async generator), checked first."""
        lookup = self._registry.lookup
        allowed_uid = self._allowed_uid
        if inspect.isasyncgenfunction(behavior):

            async def checked_stream(request: Any, context: Context) -> AsyncIterator[Any]:
                caller = lookup(context.peer())
                if caller is None or caller.uid != allowed_uid:
                    await self._refuse(context, caller, method)
                _current_caller.set(caller)
                async for response in behavior(request, context):
                    yield response

            return checked_stream

        async def checked(request: Any, context: Context) -> Any:
            caller = lookup(context.peer())
            if caller is None or caller.uid != allowed_uid:
                await self._refuse(context, caller, method)
            _current_caller.set(caller)
            result = behavior(request, context)  # a coroutine, or a plain function's result
            return await result if inspect.isawaitable(result) else result

        return checked

    async def _refuse(self, context: Context, caller: Caller | None, method: str) -> NoReturn:
        if caller is None:
            log.warning(
                "refused a connection that did not come through the broker socket",
                extra={"method": method, "peer": context.peer()},
            )
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "caller identity unknown: connect through the broker socket",
            )
        log.warning(
            "refused a caller of another user",
            extra={"method": method, "caller_uid": caller.uid, "caller_pid": caller.pid},
        )
        await context.abort(
            grpc.StatusCode.PERMISSION_DENIED,
            f"uid {caller.uid} may not use the broker of uid {self._allowed_uid}",
        )


class CheckedRegistration:
    """Stands in for the server when services register, wrapping each handler in the check.

    The generated `add_*Servicer_to_server` functions (ours, health, reflection) call
    exactly these two methods, so every method of every service is checked, and an
    unknown method has no handler at all.
    """

    def __init__(self, server: grpc.aio.Server, check: CallerCheck) -> None:
        self._server = server
        self._check = check

    def add_generic_rpc_handlers(self, handlers: Sequence[GenericHandler]) -> None:
        """Register generic handlers whose every handler is checked."""
        self._server.add_generic_rpc_handlers(
            tuple(_CheckedGenericHandler(handler, self._check) for handler in handlers)
        )

    def add_registered_method_handlers(
        self, service_name: str, method_handlers: dict[str, Handler]
    ) -> None:
        """Register pre-registered methods (grpcio's fast path), each checked."""
        self._server.add_registered_method_handlers(
            service_name,
            {
                name: self._check.wrap(handler, f"/{service_name}/{name}")
                for name, handler in method_handlers.items()
            },
        )


class _CheckedGenericHandler(grpc.GenericRpcHandler):
    """A generic handler whose handlers are wrapped once per method, then reused."""

    def __init__(self, inner: GenericHandler, check: CallerCheck) -> None:
        self._inner = inner
        self._check = check
        self._wrapped: dict[str, Handler | None] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        method = handler_call_details.method
        if method not in self._wrapped:
            handler = self._inner.service(handler_call_details)
            self._wrapped[method] = None if handler is None else self._check.wrap(handler, method)
        return self._wrapped[method]


# Each kind of RPC handler and how to rebuild one around a wrapped behavior.
_HANDLER_KINDS: tuple[tuple[str, Callable[..., Handler]], ...] = (
    ("unary_unary", grpc.unary_unary_rpc_method_handler),
    ("unary_stream", grpc.unary_stream_rpc_method_handler),
    ("stream_unary", grpc.stream_unary_rpc_method_handler),
    ("stream_stream", grpc.stream_stream_rpc_method_handler),
)
