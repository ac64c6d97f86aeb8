"""A signed-in SessionManager on a fake clock, with a scripted provider, for refresh unit tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from signin_broker.oidc.answers import TokenResponse
from signin_broker.oidc.code_flow import RandomSecrets
from signin_broker.oidc.dpop import DpopKey
from signin_broker.oidc.errors import OAuthError
from signin_broker.oidc.metadata import ProviderMetadata
from signin_broker.session.accounts.events import EventBus, SessionEvent
from signin_broker.session.accounts.records import Account, AccountInfo
from signin_broker.session.manager import SessionManager
from signin_broker.session.providers.flows import DeviceFlow, SignInFlow
from signin_broker.session.providers.links import ProviderLink, Providers
from signin_broker.session.tokens import TokenSet
from signin_broker.states import EventKind
from support.clocks import FakeClock
from support.memory_store import MemoryStore

ISSUER = "https://idp.example"
SCOPES = ("openid",)
ACCOUNT = "user:1001"

# Turns of the loop settle() gives: the refresh tests need 7 at most today (each store a
# renewal writes costs two); the rest is room for longer chains, at microseconds a turn.
SETTLE_TURNS = 50

P = ParamSpec("P")
T = TypeVar("T")


class ScriptedProvider:
    """A provider's client (session.ports.ProviderClient) whose answers the test scripts.

    `refreshes` lists the refresh tokens presented, in order. A refresh waits for `stall`
    while it is set, then raises `failure` if there is one, else answers with new tokens
    (a new refresh token each time when `rotates`). userinfo rejects the token when
    `rejects_token`; revocations are listed in `revoked`, and a revoked token is refused
    afterwards, as a provider does. It passes the same contract suite as the real
    client (tests/integration/test_provider_clients.py).
    """

    client_id = "signin-broker"
    clock_problem = ""
    confidential = False  # a public client, as the broker's is by default
    clock_offset = 0.0  # the provider's clock less this device's

    def provider_time(self) -> float:
        return time.time() + self.clock_offset

    def __init__(self, lifetime: int = 3600, *, rotates: bool = True) -> None:
        self.lifetime = lifetime
        self.rotates = rotates
        self.refreshes: list[str] = []
        self.answer_within: list[float | None] = []
        self.stall: asyncio.Event | None = None
        self.failure: Exception | None = None
        self.rejects_token = False
        self.userinfo_calls = 0
        self.grants = 0  # client credentials grants asked for
        self.revoked: list[str] = []

    async def refresh(
        self,
        refresh_token: str,
        scope: str | None = None,
        resource: str | None = None,
        *,
        answer_within: float | None = None,
        dpop: DpopKey | None = None,
    ) -> TokenResponse:
        self.refreshes.append(refresh_token)
        self.answer_within.append(answer_within)
        revoked = refresh_token in self.revoked  # as it arrives: a stalled answer still comes
        if self.stall is not None:
            await self.stall.wait()
        if self.failure is not None:
            raise self.failure
        if revoked:
            raise OAuthError("invalid_grant", "the refresh token was revoked", 400)
        n = len(self.refreshes)
        rotated = f"rt-{n}" if self.rotates else None
        scopes = tuple(scope.split()) if scope else None
        return TokenResponse(f"at-{n}", "Bearer", self.lifetime, rotated, None, scopes)

    async def client_credentials(
        self, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """A service account's token (a new one each time), or the scripted failure."""
        self.grants += 1
        if self.failure is not None:
            raise self.failure
        scopes = tuple(scope.split()) if scope else None
        return TokenResponse(f"cc-{self.grants}", "Bearer", self.lifetime, None, None, scopes)

    async def userinfo(self, access_token: str, dpop: DpopKey | None = None) -> dict[str, Any]:
        self.userinfo_calls += 1
        if self.rejects_token or access_token in self.revoked:
            raise OAuthError("invalid_token", "the provider rejected the access token", 401)
        return {"sub": "1001"}

    async def revoke(self, token: str, hint: str, dpop: DpopKey | None = None) -> bool:
        self.revoked.append(token)
        return True

    async def metadata(self) -> ProviderMetadata:
        return ProviderMetadata(
            ISSUER,
            f"{ISSUER}/authorize",
            f"{ISSUER}/token",
            f"{ISSUER}/jwks",
            userinfo_endpoint=f"{ISSUER}/userinfo",
            revocation_endpoint=f"{ISSUER}/revoke",
        )

    async def close(self) -> None:
        pass


class InlineExecutor(ThreadPoolExecutor):
    """Runs the manager's worker-thread calls at once, on the loop's own thread.

    The store here is in memory, so nothing blocks; a store or delete is then done within
    a few turns of the loop instead of after some real time that load can stretch.
    """

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:
            future.set_exception(error)
        return future


class RecordedEvents(EventBus):
    """An event bus that also keeps every event published."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[SessionEvent] = []

    def publish(self, event: SessionEvent) -> None:
        self.seen.append(event)
        super().publish(event)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.seen]


def stored_account(clock: FakeClock, tokens: TokenSet | None = None) -> MemoryStore:
    """A store holding one signed-in account whose tokens were issued just now."""
    tokens = tokens or TokenSet(
        "at-0", "Bearer", ("openid",), clock(), clock() + 3600, refresh_token="rt-0"
    )
    store = MemoryStore()
    account = Account(AccountInfo(ACCOUNT, "1001", is_default=True), tokens)
    store.save(ACCOUNT, account.to_record(ISSUER))
    return store


def providers_of(issuer: str, provider: ScriptedProvider) -> Providers:
    """The main provider only, its client a scripted one; its sign-in flows go unused here."""
    link = ProviderLink(
        "",
        issuer,
        provider,
        provider,
        SignInFlow(provider, SCOPES, RandomSecrets()),  # type: ignore[arg-type]
        DeviceFlow(provider, SCOPES),  # type: ignore[arg-type]
    )
    return Providers([link])


async def signed_in(
    clock: FakeClock,
    provider: ScriptedProvider,
    store: MemoryStore | None = None,
    revalidate_seconds: int = 30,
) -> tuple[SessionManager, RecordedEvents]:
    """A manager with the stored account restored, and the events it publishes.

    The running loop's worker threads become inline (InlineExecutor), so settle() is exact.
    """
    asyncio.get_running_loop().set_default_executor(InlineExecutor())
    events = RecordedEvents()
    session = SessionManager(revalidate_seconds=revalidate_seconds, events=events, clock=clock)
    await session.start(providers_of(ISSUER, provider), store or stored_account(clock), "test")
    return session, events


async def settle() -> None:
    """Let every task that can run do so (a renewal that is not stalled ends).

    No real time passes: the manager's worker-thread calls run inline (see signed_in),
    so turns of the loop are all a renewal, its store and its events take.
    """
    for _ in range(SETTLE_TURNS):
        await asyncio.sleep(0)
