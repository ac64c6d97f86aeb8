"""Issuer checks: discovery's issuer and the id_token's `iss` exactly as the provider states them.

OpenID Connect Discovery 4.3 and Core 3.1.3.7, with Entra ID's multi-tenant template,
and RFC 9207's `iss` in the authorization response.
"""

from __future__ import annotations

import pytest

from signin_broker.oidc.code_flow import AuthorizationRequest
from signin_broker.oidc.errors import IdTokenInvalid, ProviderUnavailable
from signin_broker.oidc.metadata import ProviderMetadata, discovery_url
from support.fake_provider import FakeProvider, run

ENTRA = "https://login.microsoftonline.com"
ENTRA_TEMPLATE = ENTRA + "/{tenantid}/v2.0"
TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"


def test_the_discovery_url_drops_the_issuers_trailing_slash_only_to_build_it() -> None:
    assert discovery_url("https://x.auth0.com/") == (
        "https://x.auth0.com/.well-known/openid-configuration"
    )
    assert discovery_url("https://kc.example/realms/a") == (
        "https://kc.example/realms/a/.well-known/openid-configuration"
    )


@pytest.mark.parametrize("issuer", ["https://x.auth0.com/", "https://kc.example/realms/a"])
def test_a_provider_is_found_and_trusted_by_its_issuer_exactly_as_stated(issuer: str) -> None:
    idp = FakeProvider(issuer)

    async def scenario() -> dict[str, object]:
        provider, _ = idp.provider()
        assert (await provider.metadata()).issuer == issuer
        return await provider.validate_id_token(idp.id_token(), None)

    assert run(scenario())["iss"] == issuer
    assert idp.fetches(discovery_url(issuer)) == 1


@pytest.mark.parametrize(
    ("configured", "stated"),
    [
        ("https://x.auth0.com", "https://x.auth0.com/"),
        ("https://x.auth0.com/", "https://x.auth0.com"),
        ("https://id.example.com", "https://evil.example.com"),
    ],
)
def test_a_discovery_document_naming_another_issuer_is_refused(
    configured: str, stated: str
) -> None:
    document = FakeProvider(stated).discovery()
    with pytest.raises(ProviderUnavailable, match="names issuer") as refused:
        ProviderMetadata.from_document(document, configured)
    if stated.rstrip("/") == configured.rstrip("/"):  # the likely typo is named
        assert f"set issuer to exactly {stated!r}" in str(refused.value)


@pytest.mark.parametrize(
    "iss", ["https://x.auth0.com", "https://x.auth0.com//", "https://X.auth0.com/", None]
)
def test_an_id_token_whose_iss_is_not_exactly_the_issuer_is_refused(iss: str | None) -> None:
    idp = FakeProvider("https://x.auth0.com/")

    async def scenario() -> None:
        provider, _ = idp.provider()
        await provider.validate_id_token(idp.id_token(iss=iss), None)

    with pytest.raises(IdTokenInvalid):
        run(scenario())


@pytest.mark.parametrize("configured", [ENTRA + "/organizations/v2.0", ENTRA + "/common/v2.0"])
def test_entra_multi_tenant_iss_is_the_template_filled_with_the_tokens_tid(
    configured: str,
) -> None:
    idp = FakeProvider(configured, base=ENTRA)
    idp.set_discovery(idp.discovery(issuer=ENTRA_TEMPLATE))

    async def scenario() -> dict[str, object]:
        provider, _ = idp.provider()
        token = idp.id_token(iss=f"{ENTRA}/{TENANT}/v2.0", tid=TENANT)
        return await provider.validate_id_token(token, None)

    assert run(scenario())["tid"] == TENANT


@pytest.mark.parametrize(
    ("iss", "tid"),
    [
        (f"{ENTRA}/{TENANT}/v2.0", None),  # no tenant to fill the template with
        (f"{ENTRA}/{TENANT}/v2.0", "another-tenant"),  # iss and tid disagree
        (f"{ENTRA}/other/v2.0", "other/v2.0/x"),  # a tid that is not one path segment
        (ENTRA_TEMPLATE, TENANT),  # the template itself
        (f"https://evil.example/{TENANT}/v2.0", TENANT),
    ],
)
def test_entra_templated_iss_is_refused_unless_tid_fills_it_exactly(
    iss: str, tid: str | None
) -> None:
    idp = FakeProvider(ENTRA + "/organizations/v2.0", base=ENTRA)
    idp.set_discovery(idp.discovery(issuer=ENTRA_TEMPLATE))

    async def scenario() -> None:
        provider, _ = idp.provider()
        await provider.validate_id_token(idp.id_token(iss=iss, tid=tid), None)

    with pytest.raises(IdTokenInvalid):
        run(scenario())


@pytest.mark.parametrize(
    "configured",
    [
        "https://login.example.com/organizations/v2.0",  # another host
        ENTRA + "/organizations/v1.0",  # another tail
        ENTRA + "/a/b/v2.0",  # two segments for one tenant
        ENTRA + "//v2.0",  # no tenant at all
    ],
)
def test_a_template_the_configured_issuer_does_not_fill_is_refused(configured: str) -> None:
    document = FakeProvider(ENTRA_TEMPLATE, base=ENTRA).discovery()
    with pytest.raises(ProviderUnavailable, match="names issuer"):
        ProviderMetadata.from_document(document, configured)


def _pending(metadata: ProviderMetadata) -> AuthorizationRequest:
    return AuthorizationRequest("s", "n", "v", "http://127.0.0.1/cb", provider=metadata)


@pytest.mark.parametrize(
    ("advertised", "iss", "refused"),
    [
        (True, "https://id.example.com", False),
        (True, None, True),  # promised, missing: RFC 9207 2.4
        (True, "https://attacker.example", True),
        (True, "https://id.example.com/", True),  # simple string comparison
        (False, None, False),  # a provider without RFC 9207
        (False, "https://id.example.com", False),
        (False, "https://attacker.example", True),  # any iss sent is checked
    ],
)
def test_the_authorization_responses_iss_must_name_the_provider_asked(
    advertised: bool, iss: str | None, refused: bool
) -> None:
    document = FakeProvider("https://id.example.com").discovery(
        authorization_response_iss_parameter_supported=advertised
    )
    metadata = ProviderMetadata.from_document(document, "https://id.example.com")
    assert metadata.iss_parameter_supported is advertised
    assert bool(_pending(metadata).issuer_problem(iss)) is refused


def test_entra_template_iss_in_the_response_may_name_one_tenant() -> None:
    document = FakeProvider(ENTRA_TEMPLATE, base=ENTRA).discovery()
    metadata = ProviderMetadata.from_document(document, ENTRA + "/organizations/v2.0")
    pending = _pending(metadata)
    assert pending.issuer_problem(f"{ENTRA}/{TENANT}/v2.0") == ""
    assert pending.issuer_problem(f"{ENTRA}/a/b/v2.0")
