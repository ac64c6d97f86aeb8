"""What the sync and asyncio clients share: where the daemon is, channel options, requests."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..locations import default_socket_path
from ..v1 import broker_pb2 as pb

DEFAULT_TIMEOUT_SECONDS = 10.0
CHANNEL_OPTIONS = (
    # A restarted daemon is found again quickly: the first retry comes after 0.1 s.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # grpc-core also uses this as the time a connection may take to answer. Under
    # socket activation the first connection waits while the daemon starts (about
    # half a second), so it must not be cut off at the backoff's 0.1 s.
    ("grpc.min_reconnect_backoff_ms", 10_000),
)


def resolve_socket(socket_path: str | os.PathLike[str] | None) -> str:
    """The given socket, else SIGNIN_BROKER_SOCKET, else the default in the runtime folder."""
    return os.fspath(socket_path) if socket_path is not None else default_socket_path()


def target(socket_path: str) -> str:
    """The grpcio target for a Unix socket path."""
    return f"unix:{os.path.abspath(socket_path)}"  # noqa: PTH100 - pathlib costs the CLI ~7 ms


def sign_in_request(
    workspace_id: str,
    device: bool | None,
    *,
    account: str = "",
    redirect_to: str = "",
    authorize_params: Mapping[str, str] | None = None,
    provider: str = "",
) -> pb.BeginSignInRequest:
    """The BeginSignIn request: a device sign-in, a browser one, or (None) the daemon's choice."""
    method = {
        None: pb.SIGN_IN_METHOD_UNSPECIFIED,
        True: pb.SIGN_IN_METHOD_DEVICE_CODE,
        False: pb.SIGN_IN_METHOD_BROWSER,
    }[device]
    return pb.BeginSignInRequest(
        method=method,
        workspace_id=workspace_id,
        account=account,
        redirect_to=redirect_to,
        authorize_params=dict(authorize_params or {}),
        provider=provider,
    )


def token_request(
    account: str, scopes: Iterable[str], min_ttl_seconds: int, audience: str
) -> pb.GetTokenRequest:
    """The GetToken request for the clients' keyword arguments."""
    return pb.GetTokenRequest(
        account=account, scopes=list(scopes), min_ttl_seconds=min_ttl_seconds, audience=audience
    )
