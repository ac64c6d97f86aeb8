"""A provider's HTTP answers read as OAuth reads them: bounded bodies, JSON, error codes.

provider.py makes the requests; this module says what an answer means, so that a
captive portal's page or an oversized body never passes for the provider's word.
"""

from __future__ import annotations

from typing import Any

import httpx2

from .answers import MAX_ANSWER_BYTES
from .errors import AnswerLost, AnswerUnusable, OAuthError, ProviderUnavailable

PAGES = ("text/html", "application/xhtml+xml")  # what a middlebox shows a person


async def read_bounded(response: httpx2.Response, what: str) -> bytes:
    """The answer's body (decoded), refused once it is over MAX_ANSWER_BYTES.

    Refused as unusable when the provider answered (see from_the_provider), else as
    not answering usefully.
    """
    refusal = AnswerUnusable if from_the_provider(response) else ProviderUnavailable
    too_large = f"the {what} endpoint's answer is over {MAX_ANSWER_BYTES // 1024} KiB"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
        raise refusal(too_large)
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise refusal(too_large)
    return bytes(body)


def json_of(response: httpx2.Response, what: str) -> Any:
    if response.status_code >= 400:
        raise ProviderUnavailable(f"the {what} endpoint answered HTTP {response.status_code}")
    try:
        return response.json()
    except ValueError:
        raise (AnswerUnusable if from_the_provider(response) else ProviderUnavailable)(
            f"the {what} endpoint answered something that is not JSON"
            f" ({response.headers.get('content-type', 'no content type')!r:.60})"
        ) from None


def from_the_provider(response: httpx2.Response) -> bool:
    """Whether a success answer comes from the provider, which then acted on the request.

    OAuth endpoints answer JSON (RFC 6749 5.1). A success that is a page for a person
    (HTML, from a captive portal or a proxy) is taken as never having reached it, so a
    hotel's login page cannot put a refresh token in doubt. Any other success came from
    the endpoint's origin itself: redirects are not followed, and only loopback may be
    plain HTTP (elsewhere TLS vouches for the origin), so garbage of another type is the
    provider's own, after it acted.
    """
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return response.is_success and media_type not in PAGES


def cut_short(streamed: httpx2.Response | None, what: str, why: str) -> ProviderUnavailable:
    """An exchange that ended before its whole answer, by whether the provider had acted.

    Before the answer's head nobody can tell (AnswerLost); a success of the provider's
    own type that stops half-way was acted on (AnswerUnusable); any other answer never
    reached the provider, or was a refusal (ProviderUnavailable).
    """
    if streamed is None:
        return AnswerLost(f"the {what} request got no answer ({why})")
    cut = f"the {what} endpoint's answer stopped half-way ({why})"
    return AnswerUnusable(cut) if from_the_provider(streamed) else ProviderUnavailable(cut)


def oauth_error(response: httpx2.Response) -> OAuthError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    error = body.get("error")
    description = body.get("error_description")
    unnamed = "invalid_client" if response.status_code == 401 else "invalid_request"  # RFC 6749 5.2
    return OAuthError(
        error if isinstance(error, str) else unnamed,
        description if isinstance(description, str) else "",
        response.status_code,
    )
