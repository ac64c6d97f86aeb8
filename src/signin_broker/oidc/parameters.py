"""OAuth's requests as parameters, by authlib: the authorize URL, a token request's body, PKCE.

RFC 6749 4.1.1 and 4.1.3, RFC 7636 4.2. authlib's helpers load some 40 modules (about
3 MB resident): they are imported at their first use, so a daemon restored from its
state (after an idle exit, on a shared machine) holds them only once it signs someone
in or renews a token.
"""

from __future__ import annotations

from collections.abc import Iterable


def authorization_url(endpoint: str, params: Iterable[tuple[str, str | None]]) -> str:
    """The authorize endpoint with `params` added to its query (a None value left out)."""
    from authlib.common.urls import add_params_to_uri

    url: str = add_params_to_uri(endpoint, [(k, v) for k, v in params if v is not None])
    return url


def token_request(grant_type: str, **params: str | None) -> str:
    """A token request's form body: grant_type, then `params` that have a value."""
    from authlib.oauth2.rfc6749.parameters import prepare_token_request

    body: str = prepare_token_request(grant_type, **params)
    return body


def s256_challenge(code_verifier: str) -> str:
    """The PKCE code_challenge of a verifier (S256)."""
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    challenge: str = create_s256_code_challenge(code_verifier)
    return challenge
