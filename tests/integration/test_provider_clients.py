"""The contract of a provider's client, as the sessions use it (session.ports.ProviderClient).

Every implementation passes the same suite: the real one (oidc.provider.Provider)
against the stub provider on loopback, over HTTP, and the scripted fake the refresh
unit tests use (support.refreshing.ScriptedProvider). A fake that drifted from what
the real client does would make those fast tests prove the wrong thing.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest

from signin_broker.oidc import device_flow
from signin_broker.oidc.answers import TokenResponse
from signin_broker.oidc.device_flow import DeviceSignedIn
from signin_broker.oidc.errors import OAuthError
from signin_broker.oidc.provider import Provider
from signin_broker.session.ports import ProviderClient
from signin_broker_testing import StubProvider
from support.refreshing import ISSUER, ScriptedProvider

CLIENT_ID = "signin-broker"
SCOPES = ("openid", "profile", "email")
SIGN_IN_SECONDS = 30.0

# A client and the tokens of a fresh sign-in with it (made on the test's own loop).
Opened = Callable[[], Awaitable[tuple[ProviderClient, TokenResponse]]]


@pytest.fixture(params=["real client, stub provider", "scripted fake"])
def opened(request: pytest.FixtureRequest) -> Iterator[Opened]:
    if request.param == "scripted fake":

        async def scripted() -> tuple[ProviderClient, TokenResponse]:
            tokens = TokenResponse("at-0", "Bearer", 3600, "rt-0", None, SCOPES)
            return ScriptedProvider(), tokens

        yield scripted
        return
    stub = StubProvider(device_interval=1).start()
    try:

        async def real() -> tuple[ProviderClient, TokenResponse]:
            client = Provider(stub.issuer, CLIENT_ID)
            grant = await device_flow.authorization(client, SCOPES, {})
            stub.approve_device(grant.user_code, "1001")
            deadline = time.monotonic() + SIGN_IN_SECONDS
            async for step in device_flow.polled(client, grant, deadline):
                if isinstance(step, DeviceSignedIn):
                    return client, step.tokens
            raise AssertionError("the stub provider never answered the device sign-in")

        yield real
    finally:
        stub.stop()


def run(
    opened: Opened, scenario: Callable[[ProviderClient, TokenResponse], Awaitable[None]]
) -> None:
    async def body() -> None:
        client, tokens = await opened()
        try:
            await scenario(client, tokens)
        finally:
            await client.close()

    asyncio.run(body())


def test_it_names_its_client_and_the_providers_endpoints(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        metadata = await client.metadata()
        assert client.client_id == CLIENT_ID
        assert metadata.issuer.startswith(("http://127.0.0.1", ISSUER))
        assert metadata.token_endpoint and metadata.userinfo_endpoint
        assert metadata.revocation_endpoint
        assert client.clock_problem == ""  # same machine, same clock

    run(opened, scenario)


def test_a_refresh_gives_a_new_access_token_and_a_new_refresh_token(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        assert tokens.refresh_token
        renewed = await client.refresh(tokens.refresh_token)
        assert renewed.access_token and renewed.access_token != tokens.access_token
        assert renewed.token_type.lower() == "bearer"
        assert renewed.expires_in is not None and renewed.expires_in > 0
        assert renewed.refresh_token and renewed.refresh_token != tokens.refresh_token

    run(opened, scenario)


def test_a_refresh_for_a_narrower_scope_grants_no_more(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        assert tokens.refresh_token
        narrowed = await client.refresh(tokens.refresh_token, scope="openid")
        assert narrowed.scope is None or set(narrowed.scope) <= {"openid"}

    run(opened, scenario)


def test_userinfo_names_the_user_of_a_live_token(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        claims = await client.userinfo(tokens.access_token)
        assert isinstance(claims.get("sub"), str) and claims["sub"]

    run(opened, scenario)


def test_a_revoked_refresh_token_is_refused_as_invalid_grant(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        assert tokens.refresh_token
        assert await client.revoke(tokens.refresh_token, "refresh_token") is True
        with pytest.raises(OAuthError) as refused:
            await client.refresh(tokens.refresh_token)
        assert refused.value.error == "invalid_grant"

    run(opened, scenario)


def test_a_revoked_access_token_is_refused_by_userinfo_as_invalid_token(opened: Opened) -> None:
    async def scenario(client: ProviderClient, tokens: TokenResponse) -> None:
        assert await client.revoke(tokens.access_token, "access_token") is True
        with pytest.raises(OAuthError) as refused:
            await client.userinfo(tokens.access_token)
        assert refused.value.error == "invalid_token"

    run(opened, scenario)


def _members(implementation: object) -> dict[str, inspect.Signature | None]:
    """The protocol's members it has: a method's signature, None for a plain value."""
    found: dict[str, inspect.Signature | None] = {}
    for name in (n for n in vars(ProviderClient) if not n.startswith("_")):
        member = inspect.getattr_static(implementation, name, None)
        if inspect.isfunction(member):
            found[name] = inspect.signature(member)
        elif member is not None or hasattr(implementation, name):
            found[name] = None
    return found


def test_both_implementations_have_every_member_with_the_protocols_signature() -> None:
    protocol = _members(ProviderClient)
    assert set(protocol) >= {"client_id", "metadata", "refresh", "userinfo", "revoke", "close"}
    for implementation in (Provider(ISSUER, CLIENT_ID), ScriptedProvider()):
        members = _members(implementation)
        assert set(members) == set(protocol), implementation
        for name, signature in protocol.items():
            if signature is not None:
                implemented = members[name]
                assert implemented is not None, (implementation, name)
                assert list(implemented.parameters) == list(signature.parameters), name
