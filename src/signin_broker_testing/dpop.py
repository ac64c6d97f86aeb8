"""DPoP (RFC 9449) at the stub provider: proofs checked, nonces demanded, refusals answered.

A proof must be a `dpop+jwt` signed by the public key in its own header (ES256 or
EdDSA, never a private key), for this request's method and URL (`htm`, `htu`
without query and fragment), issued within IAT_WINDOW_SECONDS, with a `jti` never
seen before, the hash of the access token it comes with (`ath`) at a resource, and
the current nonce while the stub demands one. What it binds is the key's RFC 7638
thumbprint (`cnf.jkt`): tokens issued with a proof are bound to it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, import_key
from starlette.responses import JSONResponse

from .rules import NO_STORE

ALGORITHMS = ["ES256", "EdDSA"]  # what discovery lists as dpop_signing_alg_values_supported
IAT_WINDOW_SECONDS = 60  # a proof issued longer ago, or later, than this is refused
MAX_JTIS = 100_000  # proofs remembered against replay (oldest forgotten first)
INVALID_PROOF = "invalid_dpop_proof"
USE_NONCE = "use_dpop_nonce"
TOKEN_TYPE = "DPoP"  # noqa: S105 - a token type, not a password


class DpopRefusal(Exception):
    """A request's DPoP proof is refused: the OAuth error code and why."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


def htu(url: str) -> str:
    """A URL as a proof names it: no query or fragment, the host in lower case."""
    parts = urlsplit(url)
    where = parts.netloc.rpartition("@")[2].lower()
    return urlunsplit((parts.scheme.lower(), where, parts.path or "/", "", ""))


def token_hash(access_token: str) -> str:
    """What `ath` holds: base64url of the token's SHA-256."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class StubDpop:
    """The stub's DPoP checks, and the nonce it demands while `nonce_demanded()` says so."""

    def __init__(self, nonce_demanded: Callable[[], bool]) -> None:
        self._nonce_demanded = nonce_demanded
        self._lock = threading.Lock()
        self._nonce = secrets.token_urlsafe(16)
        self._jtis: OrderedDict[str, None] = OrderedDict()
        self.nonce_challenges = 0  # how many use_dpop_nonce refusals were answered
        self.proofs_accepted = 0

    def new_nonce(self) -> str:
        """Demand a fresh nonce from now on (the old one is refused); returns it."""
        with self._lock:
            self._nonce = secrets.token_urlsafe(16)
            return self._nonce

    @property
    def nonce(self) -> str:
        """The nonce proofs must carry while one is demanded."""
        return self._nonce

    def check(
        self, proof: str | None, method: str, url: str, access_token: str | None = None
    ) -> str:
        """The thumbprint of the key that signed a valid proof; DpopRefusal otherwise."""
        if not proof or "," in proof:
            raise DpopRefusal(INVALID_PROOF, "exactly one DPoP header is required")
        header, claims = _verified(proof)
        if claims.get("htm") != method or not isinstance(claims.get("htu"), str):
            raise DpopRefusal(INVALID_PROOF, "htm does not name this request's method")
        if htu(claims["htu"]) != htu(url):
            raise DpopRefusal(INVALID_PROOF, "htu does not name this request's URL")
        iat = claims.get("iat")
        if not isinstance(iat, int) or abs(time.time() - iat) > IAT_WINDOW_SECONDS:
            raise DpopRefusal(INVALID_PROOF, "iat is missing or out of the accepted window")
        if access_token is not None and claims.get("ath") != token_hash(access_token):
            raise DpopRefusal(INVALID_PROOF, "ath is not the hash of the access token sent")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise DpopRefusal(INVALID_PROOF, "the proof has no jti")
        with self._lock:
            if self._nonce_demanded() and claims.get("nonce") != self._nonce:
                self.nonce_challenges += 1
                raise DpopRefusal(USE_NONCE, "send the proof again with the DPoP-Nonce given")
            if jti in self._jtis:
                raise DpopRefusal(INVALID_PROOF, "this proof (its jti) was used before")
            self._jtis[jti] = None
            if len(self._jtis) > MAX_JTIS:
                self._jtis.popitem(last=False)
            self.proofs_accepted += 1
        return str(import_key(header["jwk"]).thumbprint())

    def token_refusal(self, refusal: DpopRefusal) -> JSONResponse:
        """The token endpoint's answer to a refused proof (RFC 9449 8: 400, the nonce given)."""
        body = {"error": refusal.error, "error_description": refusal.description}
        return JSONResponse(body, 400, headers={**NO_STORE, **self._nonce_header()})

    def resource_refusal(self, error: str, description: str) -> JSONResponse:
        """A resource's answer to a refused token or proof (RFC 9449 7.1, 9: 401 DPoP)."""
        challenge = f'DPoP error="{error}", error_description="{description}"'
        challenge += f', algs="{" ".join(ALGORITHMS)}"'
        headers = {"WWW-Authenticate": challenge, **NO_STORE, **self._nonce_header()}
        return JSONResponse({"error": error, "error_description": description}, 401, headers)

    def _nonce_header(self) -> dict[str, str]:
        return {"DPoP-Nonce": self._nonce} if self._nonce_demanded() else {}


def _verified(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A proof's header and claims once its signature is checked with its own public key."""
    try:
        header = jws.extract_compact(proof.encode("ascii")).headers()
        if header.get("typ") != "dpop+jwt" or header.get("alg") not in ALGORITHMS:
            raise DpopRefusal(INVALID_PROOF, "typ must be dpop+jwt and alg ES256 or EdDSA")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or "d" in jwk:
            raise DpopRefusal(INVALID_PROOF, "the header must hold a public jwk")
        key = import_key(jwk)
        if not isinstance(key, (ECKey, OKPKey)):
            raise DpopRefusal(INVALID_PROOF, "the jwk is no EC or OKP key")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # joserfc's warning about the name EdDSA
            token = jwt.decode(proof, key, algorithms=[header["alg"]])
    except (JoseError, ValueError, TypeError, KeyError, UnicodeError) as error:
        raise DpopRefusal(
            INVALID_PROOF, f"the proof is not a valid JWT ({type(error).__name__})"
        ) from None
    return dict(header), dict(token.claims)
