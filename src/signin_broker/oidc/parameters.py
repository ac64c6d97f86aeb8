"""OAuth's requests as parameters: the authorize URL, a token request's body, PKCE's S256.

RFC 6749 4.1.1 and 4.1.3 (application/x-www-form-urlencoded), RFC 7636 4.2. A few
lines of the standard library where authlib's helpers would load 42 modules (about
a megabyte) into every daemon for them; the stub provider keeps authlib.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def authorization_url(endpoint: str, params: Iterable[tuple[str, str | None]]) -> str:
    """The authorize endpoint with `params` added to its query (its own parameters kept).

    A parameter whose value is None is left out.
    """
    parts = urlsplit(endpoint)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query.extend((name, value) for name, value in params if value is not None)
    return urlunsplit(parts._replace(query=urlencode(query)))


def token_request(grant_type: str, **params: str | None) -> str:
    """A token request's form body: grant_type first, then `params` that have a value."""
    return urlencode([("grant_type", grant_type), *((k, v) for k, v in params.items() if v)])


def s256_challenge(code_verifier: str) -> str:
    """The PKCE code_challenge of a verifier: BASE64URL(SHA256(verifier)), unpadded."""
    digest = hashlib.sha256(code_verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
