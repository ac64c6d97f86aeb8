"""Server reflection (grpcurl and the like), built at its first call.

grpclib's reflection service imports google.protobuf.descriptor_pb2 to describe files:
0.8 MB resident for a call almost no daemon is ever asked. Both versions (v1, and the
v1alpha older tools call) are served from their generated bases, and grpclib's service
is built when either is first called.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpclib.reflection.v1.reflection_grpc import ServerReflectionBase
from grpclib.reflection.v1alpha.reflection_grpc import (
    ServerReflectionBase as ServerReflectionBaseV1Alpha,
)


def reflection_on(services: Sequence[Any]) -> list[Any]:
    """Reflection on the services (v1 and v1alpha), as grpclib's ServerReflection.extend adds."""
    built = _Built(services)
    return [_V1(built), _V1Alpha(built)]


class _Built:
    """grpclib's reflection services (v1, v1alpha), made at the first call."""

    def __init__(self, services: Sequence[Any]) -> None:
        self._services = list(services)
        self._versions: list[Any] = []

    def version(self, index: int) -> Any:
        if not self._versions:
            from grpclib.reflection.service import ServerReflection

            self._versions = ServerReflection.extend(self._services)[-2:]
        return self._versions[index]


class _V1(ServerReflectionBase):
    def __init__(self, built: _Built) -> None:
        self._built = built

    async def ServerReflectionInfo(self, stream: Any) -> None:
        await self._built.version(0).ServerReflectionInfo(stream)


class _V1Alpha(ServerReflectionBaseV1Alpha):
    def __init__(self, built: _Built) -> None:
        self._built = built

    async def ServerReflectionInfo(self, stream: Any) -> None:
        await self._built.version(1).ServerReflectionInfo(stream)
