"""When to ask again, told to apps beside a refusal that passes (a renewal under way, say).

In seconds, under HTTP's name in both transports: a `retry-after` trailer of the gRPC
call (grpc-retry-pushback-ms, gRPC's own, is a name grpclib reserves), the Retry-After
header of a JSON call.
"""

from __future__ import annotations

from grpclib.const import Status
from grpclib.exceptions import GRPCError

RETRY_AFTER = "retry-after"


class RetryHinted(GRPCError):
    """A gRPC refusal with the seconds after which the same call may succeed."""

    def __init__(self, status: Status, message: str, retry_after: int) -> None:
        super().__init__(status, message)
        self.retry_after = retry_after

    def trailer(self) -> dict[str, str]:
        """The trailing metadata that carries the hint."""
        return {RETRY_AFTER: str(self.retry_after)}
