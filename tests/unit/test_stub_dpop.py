"""The stub provider's DPoP checks (testing/dpop.py) refuse what RFC 9449 4.3 refuses."""

from __future__ import annotations

import time

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey

from signin_broker.oidc.dpop import DpopKey
from signin_broker_testing.dpop import IAT_WINDOW_SECONDS, DpopRefusal, StubDpop

URL = "http://127.0.0.1:9/token"


def refusal(check: StubDpop, proof: str, method: str = "POST", url: str = URL) -> str:
    with pytest.raises(DpopRefusal) as refused:
        check.check(proof, method, url)
    return refused.value.description


def test_a_good_proof_gives_its_keys_thumbprint_once() -> None:
    check, key = StubDpop(lambda: False), DpopKey.generate("EdDSA")
    proof = key.proof("POST", URL + "?query=ignored")
    assert check.check(proof, "POST", URL) == key.thumbprint
    assert "jti" in refusal(check, proof)


def test_stale_foreign_or_self_signed_with_a_private_key_proofs_are_refused() -> None:
    check, key = StubDpop(lambda: False), DpopKey.generate("ES256")
    old = key.proof("POST", URL, now=time.time() - IAT_WINDOW_SECONDS - 5)
    assert "iat" in refusal(check, old)
    assert "htm" in refusal(check, key.proof("GET", URL))
    assert "htu" in refusal(check, key.proof("POST", "http://127.0.0.1:9/other"))
    private = ECKey.generate_key("P-256")
    leaky = jwt.encode(
        {"typ": "dpop+jwt", "alg": "ES256", "jwk": private.as_dict(private=True)},
        {"jti": "j", "htm": "POST", "htu": URL, "iat": int(time.time())},
        private,
    )
    assert "public jwk" in refusal(check, leaky)
    plain = jwt.encode({"alg": "ES256", "jwk": private.as_dict(private=False)}, {}, private)
    assert "typ" in refusal(check, plain)
    assert "one DPoP header" in refusal(check, f"{key.proof('POST', URL)}, {plain}")


def test_while_a_nonce_is_demanded_only_the_current_one_passes() -> None:
    check, key = StubDpop(lambda: True), DpopKey.generate("ES256")
    with pytest.raises(DpopRefusal) as refused:
        check.check(key.proof("POST", URL), "POST", URL)
    assert refused.value.error == "use_dpop_nonce" and check.nonce_challenges == 1
    old = check.nonce
    check.new_nonce()
    assert refusal(check, key.proof("POST", URL, nonce=old))
    assert check.check(key.proof("POST", URL, nonce=check.nonce), "POST", URL) == key.thumbprint
