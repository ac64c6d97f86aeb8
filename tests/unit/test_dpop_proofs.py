"""DPoP (RFC 9449) in the protocol room: the account's key, its proofs, the servers' nonces."""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

import httpx2
import jwt as pyjwt
import pytest

from signin_broker.oidc.dpop import (
    AUTO,
    IF_REQUIRED,
    MODES,
    OFF,
    REQUIRE,
    DpopKey,
    Nonces,
    key_for,
    requirement_shown,
    retry_key,
)
from signin_broker.oidc.errors import DpopWanted, OAuthError, ProviderMisfit
from signin_broker.oidc.provider import Provider, oauth_error
from support.fake_provider import run

ISSUER = "https://id.example.com"
TOKEN_URL = ISSUER + "/token"


def claims_of(proof: str, key: DpopKey) -> tuple[dict[str, Any], dict[str, Any]]:
    """A proof's header and claims, checked by another library with the header's own key."""
    header = pyjwt.get_unverified_header(proof)
    public = pyjwt.PyJWK(header["jwk"]).key
    algorithm = "EdDSA" if key.algorithm == "EdDSA" else "ES256"
    return header, pyjwt.decode(proof, public, algorithms=[algorithm])


@pytest.mark.parametrize("algorithm", ["ES256", "EdDSA"])
def test_a_proof_names_one_request_and_carries_only_the_public_key(algorithm: str) -> None:
    key = DpopKey.generate(algorithm)
    proof = key.proof(
        "POST", "https://me:pw@api.example.com/a/b?q=1#frag", access_token="at-1", nonce="n-1"
    )
    header, claims = claims_of(proof, key)
    assert header["typ"] == "dpop+jwt" and header["alg"] == algorithm
    assert "d" not in header["jwk"] and "d" in key.jwk
    assert claims["htm"] == "POST" and claims["htu"] == "https://api.example.com/a/b"
    assert abs(claims["iat"] - time.time()) < 5 and claims["nonce"] == "n-1"
    digest = hashlib.sha256(b"at-1").digest()
    assert claims["ath"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    again = claims_of(key.proof("POST", "https://api.example.com/a/b"), key)[1]
    assert again["jti"] != claims["jti"] and "ath" not in again and "nonce" not in again


def test_the_key_is_kept_whole_and_shown_by_its_thumbprint_only() -> None:
    key = DpopKey.generate("ES256")
    assert key.jwk["d"] not in repr(key) and key.thumbprint in repr(key)
    assert DpopKey.from_record(key.to_record()) == key
    assert DpopKey.from_record(None) is None  # an account signed in without DPoP
    with pytest.raises(ValueError, match="DPoP key"):
        DpopKey.from_record({"alg": "HS256", "jwk": {}, "jkt": "x"})


def test_the_setting_and_the_providers_algorithms_choose_the_key() -> None:
    assert MODES[0] == IF_REQUIRED  # the default (daemon.options): Bearer unless required
    assert key_for(OFF, ("ES256",), "it") is None
    assert key_for(OFF, ("ES256",), "it", required=True) is None  # off wins, even then
    assert key_for(IF_REQUIRED, ("ES256", "EdDSA"), "it") is None  # offered is not required
    required = key_for(IF_REQUIRED, ("ES256",), "it", required=True)
    assert required is not None and required.algorithm == "ES256"
    assert key_for(IF_REQUIRED, (), "it", required=True) is None  # no longer offered
    assert key_for(AUTO, (), "it") is None
    assert key_for(AUTO, ("RS256",), "it") is None
    assert key_for(AUTO, ("ES256",), "it").algorithm == "ES256"  # type: ignore[union-attr]
    assert key_for(REQUIRE, ("ES256", "EdDSA"), "it").algorithm == "EdDSA"  # type: ignore[union-attr]
    with pytest.raises(ProviderMisfit, match="dpop is require.*set dpop to if-required or off"):
        key_for(REQUIRE, ("RS256",), "the provider https://id.example.com")


@pytest.mark.parametrize(
    ("error", "description", "retried"),
    [
        ("invalid_grant", "grant request is invalid", True),  # panva's oidc-provider
        ("invalid_request", "", True),
        ("invalid_dpop_proof", "", True),
        ("unauthorized_client", "DPoP proof JWT not provided", True),  # it says so itself
        ("access_denied", "", False),
        ("invalid_client", "", False),
        ("authorization_pending", "", False),
    ],
)
def test_a_refusal_without_a_proof_is_retried_with_one_where_it_may_be_wanted(
    error: str, description: str, retried: bool
) -> None:
    refusal = OAuthError(error, description, 400)
    key = retry_key(IF_REQUIRED, ("ES256", "EdDSA"), refusal)
    assert (key is not None) is retried
    assert key is None or key.algorithm == "EdDSA"
    assert retry_key(IF_REQUIRED, ("RS256",), refusal) is None  # DPoP not offered
    assert retry_key(AUTO, ("ES256",), refusal) is None  # a proof was sent already
    assert retry_key(REQUIRE, ("ES256",), refusal) is None
    if retried:  # off sends none: the person hears that the setting stands in the way
        with pytest.raises(DpopWanted) as wanted:
            retry_key(OFF, ("ES256",), refusal)
        assert 'remove dpop = "off"' in wanted.value.hint and error in wanted.value.hint
    else:
        assert retry_key(OFF, ("ES256",), refusal) is None


@pytest.mark.parametrize(
    ("error", "description", "challenge", "proven", "shown"),
    [
        ("invalid_dpop_proof", "", "", False, "naming DPoP (invalid_dpop_proof)"),
        ("use_dpop_nonce", "", "", False, "naming DPoP (use_dpop_nonce)"),
        ("invalid_request", "", 'DPoP error="invalid_dpop_proof"', False, "naming DPoP"),
        ("invalid_request", "", 'Bearer realm="x", DPoP algs="ES256"', False, "naming DPoP"),
        ("invalid_grant", "grant request is invalid", "", True, "took the same sign-in code"),
        # Refused both ways, a code shows nothing: a made-up one is refused so too.
        ("invalid_grant", "grant request is invalid", "", False, ""),
        ("invalid_grant", "the code is bound to another DPoP key", "", False, ""),
        ("invalid_request", "", 'Bearer error="invalid_token"', False, ""),
    ],
)
def test_only_a_refusal_naming_dpop_or_a_proof_taken_shows_the_requirement(
    error: str, description: str, challenge: str, proven: bool, shown: str
) -> None:
    headers = {"WWW-Authenticate": challenge} if challenge else {}
    answer = httpx2.Response(400, json={"error": error, "error_description": description},
                             headers=headers)  # fmt: skip
    refusal = oauth_error(answer)
    said = requirement_shown(refusal, proven, "sign-in code")
    assert (shown in said) if shown else said == ""


def test_a_nonce_is_kept_per_origin_and_a_challenge_recognised() -> None:
    nonces = Nonces()
    url = "https://API.example.com/x?y=1"
    granted = httpx2.Response(200, headers={"DPoP-Nonce": "n-1"})
    assert nonces.learn(url, granted) is False and nonces.get("https://api.example.com/z") == "n-1"
    assert nonces.get("https://other.example.com/") is None
    both = 'Bearer realm="api", DPoP algs="ES256", error="use_dpop_nonce"'  # RFC 9449 7.2
    challenge = httpx2.Response(401, headers={"DPoP-Nonce": "n-2", "WWW-Authenticate": both})
    assert nonces.learn(url, challenge) is True and nonces.get(url) == "n-2"
    token = httpx2.Response(400, headers={"DPoP-Nonce": "n-3"}, json={"error": "use_dpop_nonce"})
    assert nonces.learn(url, token) is True
    refusal = httpx2.Response(400, headers={"DPoP-Nonce": "n-4"}, json={"error": "invalid_grant"})
    assert nonces.learn(url, refusal) is False
    assert nonces.learn(url, httpx2.Response(400, json={"error": "use_dpop_nonce"})) is False


class NonceDemandingProvider:
    """A token endpoint that wants its nonce in every proof, and answers `token_type`."""

    def __init__(self, token_type: str = "DPoP", algorithms: tuple[str, ...] = ("ES256",)) -> None:
        self.token_type = token_type
        self.algorithms = algorithms
        self.proofs: list[str] = []

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("openid-configuration"):
            return httpx2.Response(200, json=self.discovery())
        if "/.well-known/" in request.url.path:  # no RFC 8414 document
            return httpx2.Response(404)
        proof = request.headers["dpop"]
        self.proofs.append(proof)
        if pyjwt.decode(proof, options={"verify_signature": False}).get("nonce") != "n-1":
            return httpx2.Response(
                400, headers={"DPoP-Nonce": "n-1"}, json={"error": "use_dpop_nonce"}
            )
        return httpx2.Response(
            200, json={"access_token": "at", "token_type": self.token_type, "expires_in": 60}
        )

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": ISSUER,
            "authorization_endpoint": ISSUER + "/authorize",
            "token_endpoint": TOKEN_URL,
            "jwks_uri": ISSUER + "/jwks",
            "dpop_signing_alg_values_supported": list(self.algorithms),
        }

    def provider(self, dpop: str = AUTO) -> Provider:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.answer))
        return Provider(ISSUER, "client", http, dpop=dpop)


def test_a_use_dpop_nonce_refusal_is_answered_once_with_the_nonce_given() -> None:
    fake = NonceDemandingProvider()

    async def refresh() -> str:
        provider = fake.provider()
        key = await provider.new_dpop_key()
        assert key is not None
        return (await provider.refresh("rt", dpop=key)).token_type

    assert run(refresh()) == "DPoP"
    assert len(fake.proofs) == 2 and fake.proofs[0] != fake.proofs[1]


def test_require_refuses_a_provider_without_dpop_and_an_unbound_token() -> None:
    async def sign_in_key(fake: NonceDemandingProvider) -> None:
        await fake.provider(REQUIRE).new_dpop_key()

    with pytest.raises(ProviderMisfit, match="offers no DPoP algorithm"):
        run(sign_in_key(NonceDemandingProvider(algorithms=())))

    async def refresh(fake: NonceDemandingProvider) -> None:
        provider = fake.provider(REQUIRE)
        await provider.refresh("rt", dpop=await provider.new_dpop_key())

    with pytest.raises(ProviderMisfit, match="a Bearer token, bound to no key"):
        run(refresh(NonceDemandingProvider(token_type="Bearer")))
