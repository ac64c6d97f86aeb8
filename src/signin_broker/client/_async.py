"""The asyncio client: the same methods as BrokerClient (the rows of BrokerApi), awaited."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

import grpc

from ..v1 import broker_pb2_grpc as pb_grpc
from ._api import AwaitableApi, Stream, Unary
from ._channel import CHANNEL_OPTIONS, DEFAULT_TIMEOUT_SECONDS, Attempts, resolve_socket, target
from ._errors import translate

P = ParamSpec("P")
R = TypeVar("R")


class AsyncBrokerClient(AwaitableApi):
    """Talks to the signin-broker daemon for an asyncio app.

    Create one per event loop and reuse it: it keeps one channel and reconnects by
    itself when the daemon restarts. Use `async with` or call `close()`.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = resolve_socket(socket_path)
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(target(self.socket_path), options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.TokenBrokerStub(self._channel)

    async def close(self) -> None:
        """Close the channel; pending calls are cancelled."""
        await self._channel.close(grace=None)

    async def __aenter__(self) -> AsyncBrokerClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _unary(self, row: Unary[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
        call = getattr(self._stub, row.rpc)

        async def method(*args: P.args, **kwargs: P.kwargs) -> R:
            request = row.build(*args, **kwargs)
            timeout = self.timeout + row.wait(request)
            attempt = Attempts(self.socket_path, self.timeout)
            while True:
                try:
                    return row.convert(await call(request, timeout=timeout, **attempt.options))
                except grpc.RpcError as error:
                    await asyncio.to_thread(attempt.failed, error)

        return row.present(method, type(self))

    def _stream(self, row: Stream[P, R]) -> Callable[P, AsyncIterator[R]]:
        call = getattr(self._stub, row.rpc)

        async def method(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[R]:
            request, deadline = row.build(*args, **kwargs)
            try:
                async for message in call(request, timeout=deadline):
                    yield row.convert(message)
            except grpc.RpcError as error:
                raise translate(error, self.socket_path) from None

        return row.present(method, type(self))
