"""When to ask again, told to apps beside a refusal that passes (a renewal under way, say).

gRPC's way is the grpc-retry-pushback-ms trailer (gRFC A6), which a grpcio channel
with a retry policy obeys on its own; the JSON calls send HTTP's Retry-After.
"""

from __future__ import annotations

from grpclib.const import Status
from grpclib.exceptions import GRPCError

PUSHBACK_TRAILER = "grpc-retry-pushback-ms"


class RetryHinted(GRPCError):
    """A gRPC refusal with the seconds after which the same call may succeed."""

    def __init__(self, status: Status, message: str, retry_after: int) -> None:
        super().__init__(status, message)
        self.retry_after = retry_after

    def trailer(self) -> dict[str, str]:
        """The trailing metadata that carries the hint."""
        return {PUSHBACK_TRAILER: str(self.retry_after * 1000)}
