"""The synchronous client: one channel to the daemon, typed results, BrokerError on failure."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import ParamSpec, TypeVar

import grpc

from ..v1 import broker_pb2_grpc as pb_grpc
from ._api import BlockingApi, Stream, Unary
from ._channel import CHANNEL_OPTIONS, DEFAULT_TIMEOUT_SECONDS, Attempts, resolve_socket, target
from ._errors import translate

P = ParamSpec("P")
R = TypeVar("R")


class BrokerClient(BlockingApi):
    """Talks to the signin-broker daemon for a synchronous app.

    Create one per process and reuse it: it keeps one channel, is safe to share between
    threads, and reconnects by itself when the daemon restarts. Its methods are the
    rows of BrokerApi, called and answered here.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.timeout = timeout
        self._channel = grpc.insecure_channel(target(self.socket_path), options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.TokenBrokerStub(self._channel)

    def close(self) -> None:
        """Close the channel; pending calls fail."""
        self._channel.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _unary(self, row: Unary[P, R]) -> Callable[P, R]:
        call = getattr(self._stub, row.rpc)

        def method(*args: P.args, **kwargs: P.kwargs) -> R:
            request = row.build(*args, **kwargs)
            timeout = self.timeout + row.wait(request)
            attempt = Attempts(self.socket_path, self.timeout)
            while True:
                try:
                    return row.convert(call(request, timeout=timeout, **attempt.options))
                except grpc.RpcError as error:
                    attempt.failed(error)

        return row.present(method, type(self))

    def _stream(self, row: Stream[P, R]) -> Callable[P, Iterator[R]]:
        call = getattr(self._stub, row.rpc)

        def method(*args: P.args, **kwargs: P.kwargs) -> Iterator[R]:
            request, deadline = row.build(*args, **kwargs)
            try:
                for message in call(request, timeout=deadline):
                    yield row.convert(message)
            except grpc.RpcError as error:
                raise translate(error, self.socket_path) from None

        return row.present(method, type(self))
