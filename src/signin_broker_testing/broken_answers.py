"""Token answers broken on purpose: what a provider that answers badly sends back.

The stub acts on the request first (a refresh token rotates, a code is used up), then
answers in one of these shapes, as a buggy provider or a meddling proxy would; only
"html", a captive portal's page, answers without the request ever reaching the stub.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from starlette.responses import HTMLResponse, Response, StreamingResponse

from .rules import NO_STORE

if TYPE_CHECKING:
    from .store import BrokenAnswer

BROKEN_ANSWERS = (
    "cut_json",  # the body stops half-way
    "html",  # a captive portal's page: the request never reached the provider
    "expires_in_word",  # "expires_in": "soon"
    "expires_in_negative",  # "expires_in": -5
    "expires_in_huge",  # "expires_in": 10**12, while the token dies at its real time
    "huge_access_token",  # a 1 MB access token beside the rotated refresh token
    "huge_body",  # 50 MB of JSON, streamed
    "nested_json",  # 50,000 arrays, one inside the other (100 KB)
    "trickle",  # the real answer, a few bytes at a time over `seconds`
)
PORTAL_PAGE = "<html><body>Welcome to Hotel Wi-Fi: accept the terms to continue</body></html>"
# The access token of a "huge_access_token" answer, 1 MB; the stub takes it for the one
# it issued (its userinfo and introspection know it).
HUGE_ACCESS_TOKEN = "A" * 1_000_000
HUGE_BODY_CHUNKS = 800  # 64 KiB each: 50 MB
NESTED_JSON = b"[" * 50_000 + b"]" * 50_000
EXPIRES_IN: dict[str, object] = {
    "expires_in_word": "soon",
    "expires_in_negative": -5,
    "expires_in_huge": 10**12,
}


def before_processing(how: str) -> Response | None:
    """The answer given instead of acting on the request at all, for the modes that do."""
    return HTMLResponse(PORTAL_PAGE, 200, headers=NO_STORE) if how == "html" else None


def broken(
    answer: dict[str, object], breaking: BrokenAnswer, alias: Callable[[str, str], None]
) -> Response:
    """The stub's real answer, broken in the way `breaking.how` names (see BROKEN_ANSWERS).

    `alias(issued, huge)` makes the stub take the huge access token for the one it issued.
    """
    how, seconds = breaking.how, breaking.seconds
    body = json.dumps(answer).encode()
    if how == "cut_json":
        return Response(
            body[: len(body) // 2], 200, headers=NO_STORE, media_type="application/json"
        )
    if how == "nested_json":
        return Response(NESTED_JSON, 200, headers=NO_STORE, media_type="application/json")
    if how == "huge_body":
        return StreamingResponse(
            _padded(body), 200, headers=NO_STORE, media_type="application/json"
        )
    if how == "trickle":
        return StreamingResponse(
            _trickled(body, seconds), 200, headers=NO_STORE, media_type="application/json"
        )
    changed: dict[str, object] = {"expires_in": EXPIRES_IN.get(how)}
    if how == "huge_access_token":
        alias(str(answer["access_token"]), HUGE_ACCESS_TOKEN)
        changed = {"access_token": HUGE_ACCESS_TOKEN}
    return Response(
        json.dumps({**answer, **changed}), 200, headers=NO_STORE, media_type="application/json"
    )


async def _padded(body: bytes) -> AsyncIterator[bytes]:
    yield body[:-1] + b', "padding": "'
    for _ in range(HUGE_BODY_CHUNKS):
        yield b"x" * 65536
    yield b'"}'


async def _trickled(body: bytes, seconds: float) -> AsyncIterator[bytes]:
    pieces = [body[i : i + 16] for i in range(0, len(body), 16)]
    for piece in pieces:
        await asyncio.sleep(seconds / len(pieces))
        yield piece
