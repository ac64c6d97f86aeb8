"""The yardstick: a bare grpcio server answering the broker's RPCs with canned messages.

Same proto, same event loop (uvloop where the daemon uses it), no relay, no caller
check, no session: what a gRPC call on a Unix socket costs by itself on this machine.
Run as `python _yardstick.py SOCKET`; it prints "ready" and serves until killed.
"""

from __future__ import annotations

import asyncio
import sys

import grpc

from signin_broker.v1 import broker_pb2 as pb
from signin_broker.v1 import broker_pb2_grpc as pb_grpc

TOKEN = pb.GetTokenResponse(
    access_token="x" * 43,  # the size of the stub provider's opaque tokens
    token_type="Bearer",
    expires_at_unix=2_000_000_000,
    scopes=["openid", "profile", "email"],
    account="user:1",
)


class Canned(pb_grpc.TokenBrokerServicer):
    async def GetToken(self, request, context):
        return TOKEN

    async def GetStatus(self, request, context):
        return pb.GetStatusResponse(version="yardstick", pid=1)

    async def WatchEvents(self, request, context):
        yield pb.WatchEventsResponse(kind=pb.EVENT_KIND_SNAPSHOT)
        await asyncio.Event().wait()  # nothing more happens, until the caller leaves


async def serve(path: str) -> None:
    server = grpc.aio.server()
    pb_grpc.add_TokenBrokerServicer_to_server(Canned(), server)
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(sys.argv[1]))
    else:
        uvloop.run(serve(sys.argv[1]))
