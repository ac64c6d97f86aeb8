"""Discovery and keys over a daemon's lifetime: RFC 8414 merged in, read again when due.

The discovery document is read again daily and soon after an endpoint answers 404;
the key set daily and on an unknown kid, at most once a minute for unknown kids.
"""

from __future__ import annotations

from typing import Any

import pytest

from signin_broker.oidc.errors import IdTokenInvalid, ProviderUnavailable
from signin_broker.oidc.id_tokens import UNKNOWN_KID_RETRY_SECONDS
from signin_broker.oidc.metadata import (
    METADATA_REFRESH_SECONDS,
    METADATA_RETRY_SECONDS,
    oauth_metadata_urls,
)
from support.fake_provider import FakeProvider, SigningKey, run

REVOKE = "https://id.example.com/revoke"
DEVICE = "https://id.example.com/device_authorization"


def test_rfc8414_metadata_is_where_rfc8414_puts_it_then_after_the_issuer() -> None:
    assert oauth_metadata_urls("https://id.example.com/o") == [
        "https://id.example.com/.well-known/oauth-authorization-server/o",
        "https://id.example.com/o/.well-known/oauth-authorization-server",
    ]
    assert oauth_metadata_urls("https://x.auth0.com/") == [
        "https://x.auth0.com/.well-known/oauth-authorization-server"
    ]


@pytest.mark.parametrize("place", [0, 1])
def test_fields_the_openid_document_lacks_come_from_rfc8414_metadata(place: int) -> None:
    """django-oauth-toolkit below /o lists revocation only after the issuer (place 1)."""
    idp = FakeProvider("https://id.example.com/o")
    url = oauth_metadata_urls(idp.issuer)[place]
    idp.documents[url] = {
        "issuer": idp.issuer,
        "revocation_endpoint": REVOKE,
        "token_endpoint": "https://elsewhere.example/token",  # the OpenID document wins
        "authorization_response_iss_parameter_supported": True,
    }

    async def scenario() -> Any:
        provider, _ = idp.provider()
        return await provider.metadata()

    metadata = run(scenario())
    assert metadata.revocation_endpoint == REVOKE
    assert metadata.token_endpoint == idp.base + "/token"
    assert metadata.iss_parameter_supported


def test_rfc8414_metadata_naming_another_issuer_is_not_used() -> None:
    idp = FakeProvider("https://id.example.com")
    (url,) = oauth_metadata_urls(idp.issuer)
    idp.documents[url] = {"issuer": "https://evil.example", "revocation_endpoint": REVOKE}

    async def scenario() -> Any:
        provider, _ = idp.provider()
        return await provider.metadata()

    assert run(scenario()).revocation_endpoint == ""


def test_a_provider_without_rfc8414_metadata_works_from_its_openid_document() -> None:
    idp = FakeProvider("https://id.example.com")
    (url,) = oauth_metadata_urls(idp.issuer)
    idp.documents[url] = 503

    async def scenario() -> Any:
        provider, _ = idp.provider()
        return await provider.metadata()

    assert run(scenario()).token_endpoint == idp.base + "/token"


def test_discovery_is_read_again_once_a_day() -> None:
    idp = FakeProvider("https://id.example.com")

    async def scenario() -> list[str]:
        provider, clock = idp.provider()
        seen = [(await provider.metadata()).revocation_endpoint]
        idp.set_discovery(idp.discovery(revocation_endpoint=REVOKE))
        clock.advance(METADATA_REFRESH_SECONDS - 1)
        seen.append((await provider.metadata()).revocation_endpoint)
        clock.advance(1)
        seen.append((await provider.metadata()).revocation_endpoint)
        return seen

    assert run(scenario()) == ["", "", REVOKE]
    assert idp.fetches(idp.issuer + "/.well-known/openid-configuration") == 2


def test_a_failed_rereading_keeps_the_last_document_and_tries_again_a_minute_later() -> None:
    idp = FakeProvider("https://id.example.com")
    url = idp.issuer + "/.well-known/openid-configuration"

    async def scenario() -> list[str]:
        provider, clock = idp.provider()
        await provider.metadata()
        idp.set_discovery(500)
        clock.advance(METADATA_REFRESH_SECONDS)
        seen = [(await provider.metadata()).token_endpoint]  # read, failed, kept
        seen.append((await provider.metadata()).token_endpoint)  # not asked again yet
        idp.set_discovery(idp.discovery(token_endpoint=idp.base + "/token2"))
        clock.advance(METADATA_RETRY_SECONDS)
        seen.append((await provider.metadata()).token_endpoint)
        return seen

    assert run(scenario()) == [idp.base + "/token", idp.base + "/token", idp.base + "/token2"]
    assert idp.fetches(url) == 3


def test_an_endpoint_answering_404_has_discovery_read_again_within_a_minute() -> None:
    idp = FakeProvider("https://id.example.com")
    moved = idp.base + "/v2/userinfo"
    idp.documents[moved] = {"sub": "1001"}

    async def scenario() -> dict[str, Any]:
        provider, clock = idp.provider()
        await provider.metadata()
        idp.set_discovery(idp.discovery(userinfo_endpoint=moved))
        with pytest.raises(ProviderUnavailable):
            await provider.userinfo("token")  # 404 at the old address
        clock.advance(METADATA_RETRY_SECONDS)
        return await provider.userinfo("token")

    assert run(scenario()) == {"sub": "1001"}
    assert idp.fetches(idp.base + "/userinfo") == 1
    assert idp.fetches(idp.issuer + "/.well-known/openid-configuration") == 2


def test_an_unknown_kid_has_the_keys_read_again_at_most_once_a_minute() -> None:
    idp = FakeProvider("https://id.example.com")
    jwks = idp.base + "/jwks"

    async def scenario() -> None:
        provider, clock = idp.provider()
        await provider.validate_id_token(idp.id_token(), None)  # the first read
        rotated = SigningKey("key-2")
        idp.keys.append(rotated)
        await provider.validate_id_token(idp.id_token(rotated), None)  # read again
        assert idp.fetches(jwks) == 2
        for kid in ("forged-1", "forged-2", "forged-3"):  # other kids within the minute
            with pytest.raises(IdTokenInvalid, match="no key with kid"):
                await provider.validate_id_token(idp.id_token(SigningKey(kid)), None)
        assert idp.fetches(jwks) == 2
        clock.advance(UNKNOWN_KID_RETRY_SECONDS)
        late = SigningKey("key-3")
        idp.keys.append(late)
        await provider.validate_id_token(idp.id_token(late), None)
        assert idp.fetches(jwks) == 3

    run(scenario())


def test_the_keys_are_read_again_once_a_day_and_a_failed_read_keeps_them() -> None:
    idp = FakeProvider("https://id.example.com")
    jwks = idp.base + "/jwks"

    async def scenario() -> None:
        provider, clock = idp.provider()
        await provider.validate_id_token(idp.id_token(), None)
        clock.advance(METADATA_REFRESH_SECONDS)
        await provider.validate_id_token(idp.id_token(), None)
        assert idp.fetches(jwks) == 2
        idp.documents[jwks] = 500
        clock.advance(METADATA_REFRESH_SECONDS)
        await provider.validate_id_token(idp.id_token(), None)  # the known key still serves
        assert idp.fetches(jwks) == 3

    run(scenario())
