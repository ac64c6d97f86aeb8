"""DPoP (RFC 9449): an account's key pair, the proofs it signs, and the servers' nonces.

A token bound to a key (its `cnf.jkt`) is worthless without a fresh proof signed by
that key for each request, so a copy of it, or of the refresh token, is no use on
another machine. The private half stays in the daemon: stored with the account's
other secrets, never logged (the repr names only the thumbprint), never handed out.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ..json_depth import within_depth
from .errors import DpopWanted, OAuthError, ProviderMisfit
from .jose import eddsa_by_its_old_name

if TYPE_CHECKING:
    import httpx2

# The `dpop` setting. IF_REQUIRED, the default: Bearer tokens, which every tool can send,
# unless the provider requires DPoP of this client (learned from its refusal of a request
# without a proof, and remembered); AUTO: DPoP wherever the provider offers it (the
# default before); REQUIRE: DPoP or no sign-in; OFF: never.
IF_REQUIRED, AUTO, REQUIRE, OFF = "if-required", "auto", "require", "off"
MODES = (IF_REQUIRED, AUTO, REQUIRE, OFF)
# Why an account's tokens are bound: its provider's `dpop` setting asked for it, or the
# provider requires DPoP of the client (and a sign-in learned so).
BY_SETTING, BY_PROVIDER = "setting", "provider"
PROOF_TYPE = "dpop+jwt"
USE_DPOP_NONCE = "use_dpop_nonce"
TOKEN_TYPE = "DPoP"  # noqa: S105 - how a bound token is presented (RFC 9449 7.1)
# The algorithms this broker's keys sign with, the preferred first (EdDSA: Ed25519).
ALGORITHMS = ("EdDSA", "ES256")
MAX_ORIGINS = 64  # the nonces remembered, one per server origin


def htu(url: str) -> str:
    """A URL as a proof's `htu` names it: without query and fragment (RFC 9449 4.2).

    Any user:password@ goes too: a proof travels in the clear, and no server compares it.
    """
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def access_token_hash(access_token: str) -> str:
    """The proof's `ath`: base64url of the access token's SHA-256 (RFC 9449 4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def is_bound(token_type: str) -> bool:
    """Whether a token of this type must be sent with a proof."""
    return token_type.lower() == TOKEN_TYPE.lower()


@dataclass(frozen=True, slots=True)
class DpopKey:
    """One account's DPoP key pair; signs proofs. Its private JWK is kept out of repr."""

    algorithm: str
    jwk: dict[str, Any] = field(repr=False)  # the private key, as a JWK
    thumbprint: str = ""  # its RFC 7638 SHA-256 thumbprint: the tokens' cnf.jkt

    @classmethod
    def generate(cls, algorithm: str) -> DpopKey:
        """A fresh key pair for one of ALGORITHMS."""
        from joserfc.jwk import ECKey, OKPKey

        key = (
            OKPKey.generate_key("Ed25519") if algorithm == "EdDSA" else ECKey.generate_key("P-256")
        )
        return cls(algorithm, dict(key.as_dict(private=True)), key.thumbprint())

    @classmethod
    def from_record(cls, record: object) -> DpopKey | None:
        """Back from to_record(); None for no key (an account signed in without DPoP)."""
        if not isinstance(record, dict):
            return None
        algorithm, jwk, thumbprint = record.get("alg"), record.get("jwk"), record.get("jkt")
        if algorithm not in ALGORITHMS or not isinstance(jwk, dict) or not thumbprint:
            raise ValueError("the stored DPoP key is not one")
        return cls(algorithm, jwk, str(thumbprint))  # joserfc is loaded at its first proof

    def to_record(self) -> dict[str, Any]:
        """The key as the encrypted account state keeps it."""
        return {"alg": self.algorithm, "jwk": self.jwk, "jkt": self.thumbprint}

    def public_jwk(self) -> dict[str, Any]:
        """The public half, as each proof's header carries it."""
        return {name: value for name, value in self.jwk.items() if name != "d"}

    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
        now: float | None = None,
    ) -> str:
        """A DPoP proof JWT for one request (RFC 9449 4.2): fresh jti and iat.

        `access_token`: the token sent with it to a resource (its hash is `ath`);
        `nonce`: what the server asked for last.
        """
        from joserfc import jwt
        from joserfc.jwk import import_key

        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method,
            "htu": htu(url),
            "iat": int(time.time() if now is None else now),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce:
            claims["nonce"] = nonce
        header = {"typ": PROOF_TYPE, "alg": self.algorithm, "jwk": self.public_jwk()}
        with eddsa_by_its_old_name():
            return jwt.encode(header, claims, import_key(self.jwk), algorithms=[self.algorithm])


def key_for(
    mode: str, offered: tuple[str, ...], where: str, *, required: bool = False
) -> DpopKey | None:
    """A new key for a sign-in at a provider that offers these algorithms; None: no DPoP.

    `required`: the provider is known to require DPoP of this client. `require` with a
    provider that offers none of ALGORITHMS is ProviderMisfit.
    """
    if mode == OFF or (mode == IF_REQUIRED and not required):
        return None
    usable = [algorithm for algorithm in ALGORITHMS if algorithm in offered]
    if usable:
        return DpopKey.generate(usable[0])
    if mode == REQUIRE:
        listed = ", ".join(offered) if offered else "no dpop_signing_alg_values_supported"
        raise ProviderMisfit(
            f"dpop is require, but {where} offers no DPoP algorithm this broker signs with"
            f" ({', '.join(ALGORITHMS)}; its discovery document lists {listed}); set dpop"
            " to if-required or off for it, or enable DPoP at the provider"
        )
    return None


def offers(offered: tuple[str, ...]) -> bool:
    """Whether a provider's dpop_signing_alg_values_supported has one this broker signs with."""
    return any(algorithm in offered for algorithm in ALGORITHMS)


# Refusals that a provider requiring DPoP of a client gives a request without a proof:
# panva's oidc-provider answers a plain invalid_grant ("grant request is invalid"), others
# invalid_request or invalid_dpop_proof. With DPoP offered, any of them may mean it: the
# request is sent once more with a proof, and what the two answers teach is
# requirement_shown's to say.
REFUSALS_WITHOUT_A_PROOF = ("invalid_grant", "invalid_request", "invalid_dpop_proof")
# Errors that name DPoP themselves (RFC 9449 5, 8).
DPOP_ERRORS = ("invalid_dpop_proof", USE_DPOP_NONCE)
# Why a provider is known to require DPoP of a client (Provider.learned_dpop_required).
SAID_SO = "the provider refused a request without a DPoP proof, naming DPoP ({error})"
TOOK_THE_PROOF = (
    "the provider refused a {grant} without a DPoP proof and took the same {grant} with one"
)


def retry_key(mode: str, offered: tuple[str, ...], refusal: OAuthError) -> DpopKey | None:
    """A key to send a token request refused without a proof again with; else None.

    Only where the provider offers DPoP, the refusal may be for want of a proof, and the
    setting is if-required (auto and require sent one). With off, such a refusal is
    DpopWanted: the person has to hear which setting stands in the way.
    """
    if not offers(offered) or not may_want_a_proof(refusal):
        return None
    if mode == OFF:
        raise DpopWanted(refusal)
    return key_for(AUTO, offered, "") if mode == IF_REQUIRED else None


def may_want_a_proof(refusal: OAuthError) -> bool:
    """Whether a refusal of a request sent without a proof may be for want of one."""
    return (
        refusal.error in REFUSALS_WITHOUT_A_PROOF
        or names_dpop(refusal)
        or "dpop" in refusal.description.lower()
    )


def names_dpop(refusal: OAuthError) -> bool:
    """Whether a refusal of a request without a proof says that DPoP is what was missing.

    By its error code or a `WWW-Authenticate: DPoP` challenge, which no other cause
    gives. Not by its free text, which may describe the grant refused (a code bound to
    some other key), nor by a plain invalid_grant: a made-up code gets one too, with a
    proof or without.
    """
    return refusal.error in DPOP_ERRORS or refusal.dpop_challenge


def requirement_shown(refusal: OAuthError, proven: bool, grant: str) -> str:
    """Why a provider is known to require DPoP of a client, from the answers to one grant.

    `refusal`: its answer without a proof; `proven`: whether the same grant (the same
    code, the same device code) was then taken with a proof. "" when neither shows it:
    two refusals of a grant may only mean that it was never good.
    """
    if names_dpop(refusal):
        return SAID_SO.format(error=refusal.error)
    return TOOK_THE_PROOF.format(grant=grant) if proven else ""


class Nonces:
    """The last DPoP nonce each server origin gave (RFC 9449 8, 9), for the next proof."""

    def __init__(self) -> None:
        self._by_origin: dict[str, str] = {}

    def get(self, url: str) -> str | None:
        """The nonce to put into a proof for this URL; None before the server gave one."""
        return self._by_origin.get(_origin(url))

    def learn(self, url: str, response: httpx2.Response) -> bool:
        """Keep a nonce the answer gives; whether it asks to be sent again with that nonce."""
        nonce = response.headers.get("dpop-nonce", "")
        if nonce and nonce.isascii() and nonce.isprintable() and len(nonce) <= 512:
            if len(self._by_origin) >= MAX_ORIGINS:
                self._by_origin.pop(next(iter(self._by_origin)))
            self._by_origin[_origin(url)] = nonce
        else:
            nonce = ""
        return bool(nonce) and asks_for_nonce(response.status_code, response)


def asks_for_nonce(status: int, response: httpx2.Response) -> bool:
    """Whether an answer is a use_dpop_nonce error: the token endpoint's 400, a resource's 401."""
    if status == 401:  # a resource server (RFC 9449 9); its DPoP challenge may follow a
        # Bearer one in the same header (RFC 9449 7.2)
        return USE_DPOP_NONCE in response.headers.get("www-authenticate", "")
    if status != 400:
        return False
    try:
        body = json.loads(within_depth(response.content))
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("error") == USE_DPOP_NONCE


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()
