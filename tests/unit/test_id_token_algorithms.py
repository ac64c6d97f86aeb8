"""An id_token is checked with whichever asymmetric algorithm its provider lists, whether
or not the published JWK states its `alg` (RFC 7517 4.4: optional); a JWK that states
one verifies nothing else, and an algorithm the provider does not list is refused."""

from __future__ import annotations

import jwt
import pytest

from signin_broker.oidc.errors import IdTokenInvalid
from support.fake_provider import FakeProvider, SigningKey, run

ISSUER = "https://id.example.com"
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]


def provider_signing_with(*keys: SigningKey, listed: list[str]) -> FakeProvider:
    idp = FakeProvider(ISSUER)
    idp.keys = list(keys)
    idp.set_discovery(idp.discovery(id_token_signing_alg_values_supported=listed))
    return idp


def validate(idp: FakeProvider, token: str) -> dict[str, object]:
    provider, _ = idp.provider()
    return run(provider.validate_id_token(token, "n-1"))


@pytest.mark.parametrize("states_alg", [True, False], ids=["jwk-states-alg", "jwk-without-alg"])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_listed_algorithm_verifies_with_or_without_the_jwks_alg(
    algorithm: str, states_alg: bool
) -> None:
    key = SigningKey("k-1", algorithm, states_alg=states_alg)
    idp = provider_signing_with(key, listed=[algorithm])
    claims = validate(idp, idp.id_token(key, nonce="n-1"))
    assert claims["sub"] == "1001"


def test_a_jwk_stating_its_alg_verifies_no_other_algorithm() -> None:
    key = SigningKey("k-1", "PS256")
    key.jwk["alg"] = "RS256"  # the same RSA key, published for RS256 only
    idp = provider_signing_with(key, listed=["RS256", "PS256"])
    with pytest.raises(IdTokenInvalid, match="failed validation"):
        validate(idp, idp.id_token(key, nonce="n-1"))


def test_an_algorithm_the_provider_does_not_list_is_refused() -> None:
    key = SigningKey("k-1", "PS256", states_alg=False)
    idp = provider_signing_with(key, listed=["RS256"])
    with pytest.raises(IdTokenInvalid, match="signed with 'PS256', which is not allowed"):
        validate(idp, idp.id_token(key, nonce="n-1"))


def test_keys_of_other_kinds_or_uses_in_the_set_are_skipped() -> None:
    key = SigningKey("k-1", "ES256", states_alg=False)
    idp = provider_signing_with(key, listed=["ES256"])
    idp.documents[idp.base + "/jwks"] = {
        "keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},  # a shared secret never verifies
            {"kty": "unknown", "kid": "odd"},
            {**SigningKey("enc", "RS256").jwk, "use": "enc"},
            key.jwk,
        ]
    }
    assert validate(idp, idp.id_token(key, nonce="n-1"))["sub"] == "1001"


def test_an_id_token_whose_claims_nest_too_deep_is_invalid_not_a_recursion_error() -> None:
    """joserfc reads the claims with json: 20,000 levels (it takes tokens up to 126 KiB)
    raised RecursionError, out of the sign-in's error handling."""
    key = SigningKey("k-1", "ES256")
    idp = provider_signing_with(key, listed=["ES256"])
    nested = b'{"iss": "%s", "aud": "signin-broker", "sub": "1001", "x": ' % ISSUER.encode()
    token = jwt.PyJWS().encode(
        nested + b"[" * 20_000 + b"]" * 20_000 + b"}", key.private, algorithm="ES256",
        headers={"kid": key.kid},
    )  # fmt: skip
    with pytest.raises(IdTokenInvalid, match="nests deeper than 64 levels"):
        validate(idp, token)
