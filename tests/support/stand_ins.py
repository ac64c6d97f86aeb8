"""Stand-in servicers for the daemon's API, for tests of what reaches a handler."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from google.protobuf import message_factory

from signin_broker.daemon.api.account_access import Admitted
from signin_broker.v1 import broker_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["TokenBroker"]


class StandIns:
    """Every RPC of the service, answering an empty response and noting who reached it."""

    def __init__(self) -> None:
        self.reached: list[tuple[str, Admitted]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in SERVICE.methods_by_name:
            raise AttributeError(name)
        method = SERVICE.methods_by_name[name]
        response = message_factory.GetMessageClass(method.output_type)

        async def unary(request: object, admitted: Admitted) -> Any:
            self.reached.append((name, admitted))
            return response()

        async def streaming(request: object, admitted: Admitted) -> AsyncIterator[Any]:
            self.reached.append((name, admitted))
            yield response()

        return streaming if method.server_streaming else unary
