"""signin-broker: your OpenID Connect sign-in, owned by a per-user daemon, shared with your apps.

The daemon hands access tokens to local apps over gRPC on a Unix socket. Apps use the
client SDK, re-exported here: `from signin_broker import BrokerClient`. The re-exports
load on first use, so importing a submodule (the daemon, the stub identity provider)
does not pay for the SDK.
"""

from __future__ import annotations

from ._version import __version__

# Not `typing.TYPE_CHECKING`: importing typing costs the one-shot CLI about 5 ms, and
# type checkers read this spelling too.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .client import (
        Account,
        AsyncBrokerClient,
        BrokerClient,
        BrokerError,
        DaemonNotRunning,
        Event,
        EventKind,
        NotSignedIn,
        SignInState,
        Status,
        Token,
    )

__all__ = [
    "Account",
    "AsyncBrokerClient",
    "BrokerClient",
    "BrokerError",
    "DaemonNotRunning",
    "Event",
    "EventKind",
    "NotSignedIn",
    "SignInState",
    "Status",
    "Token",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'signin_broker' has no attribute {name!r}")
