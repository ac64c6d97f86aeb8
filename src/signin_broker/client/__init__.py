"""The SDK apps use to get tokens from the signin-broker daemon (sync and asyncio).

from signin_broker.client import BrokerClient

with BrokerClient() as broker:
    token = broker.get_token(min_ttl_seconds=60)
    headers = {"Authorization": token.authorization}
"""

from ._async import AsyncBrokerClient
from ._errors import BrokerError, DaemonNotRunning, NotSignedIn
from ._models import (
    Account,
    Caller,
    Event,
    EventKind,
    SignInStart,
    SignInState,
    SignOutResult,
    Status,
    Token,
)
from ._sync import BrokerClient

__all__ = [
    "Account",
    "AsyncBrokerClient",
    "BrokerClient",
    "BrokerError",
    "Caller",
    "DaemonNotRunning",
    "Event",
    "EventKind",
    "NotSignedIn",
    "SignInStart",
    "SignInState",
    "SignOutResult",
    "Status",
    "Token",
]
