"""The SDK an app uses to get tokens and sign-in state from the daemon (sync and asyncio).

from signin_broker.client import BrokerClient

with BrokerClient() as broker:
    token = broker.get_token(min_ttl_seconds=60)
    headers = {"Authorization": token.authorization}
"""

from typing import TYPE_CHECKING, Any

from ..states import EventKind, SignInState
from ._errors import BrokerError, DaemonNotRunning, NotSignedIn
from ._models import (
    Account,
    App,
    AppDecision,
    AppList,
    AuditEvent,
    Caller,
    DpopProof,
    EndedSession,
    Event,
    Forward,
    ProviderStatus,
    SignInStart,
    SignOutResult,
    Status,
    Token,
    TokenFile,
    TokenRevocation,
)
from ._sync import BrokerClient

if TYPE_CHECKING:
    from ._async import AsyncBrokerClient

__all__ = [
    "Account",
    "App",
    "AppDecision",
    "AppList",
    "AsyncBrokerClient",
    "AuditEvent",
    "BrokerClient",
    "BrokerError",
    "Caller",
    "DaemonNotRunning",
    "DpopProof",
    "EndedSession",
    "Event",
    "EventKind",
    "Forward",
    "NotSignedIn",
    "ProviderStatus",
    "SignInStart",
    "SignInState",
    "SignOutResult",
    "Status",
    "Token",
    "TokenFile",
    "TokenRevocation",
]


def __getattr__(name: str) -> Any:
    if name == "AsyncBrokerClient":  # loaded on first use: the one-shot CLI never needs it
        from ._async import AsyncBrokerClient

        return AsyncBrokerClient
    raise AttributeError(f"module 'signin_broker.client' has no attribute {name!r}")
