"""A token endpoint's answer is trusted only when it is whole and sane.

What the provider answered with success but cannot be used is AnswerUnusable (it may
have rotated the refresh token), carrying the new refresh token when that part is
usable; an HTML page is a portal or proxy, not the provider; answers are bounded in
size and, as a whole, in time, however slowly they trickle in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from signin_broker.oidc import provider as provider_module
from signin_broker.oidc.answers import MAX_ANSWER_BYTES, MAX_TOKEN_CHARS, MAX_TOKEN_LIFETIME_SECONDS
from signin_broker.oidc.errors import AnswerLost, AnswerUnusable, ProviderUnavailable
from support.fake_provider import FakeProvider, run

ISSUER = "https://id.example.com"
GOOD = {"access_token": "at-1", "token_type": "Bearer", "expires_in": 60, "refresh_token": "rt-1"}


def answered(*answers: httpx2.Response | dict[str, Any], within: float | None = None) -> Any:
    """What refresh() returns or raises when the token endpoint answers so."""
    fake = FakeProvider(ISSUER)
    provider, _ = fake.provider()
    results = []
    for answer in answers:
        fake.documents[fake.base + "/token"] = answer
        try:
            results.append(run(provider.refresh("rt-0", answer_within=within)))
        except Exception as error:
            results.append(error)
    return results[0] if len(results) == 1 else results


def json_answer(body: bytes | str, content_type: str = "application/json") -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": content_type}, content=body)


@pytest.mark.parametrize(
    "expires_in",
    ["soon", -5, 0, True, None, [60]],
    ids=["word", "negative", "zero", "bool", "null", "list"],
)
def test_a_bad_expires_in_is_unusable_and_the_rotated_refresh_token_is_kept(
    expires_in: Any,
) -> None:
    error = answered({**GOOD, "expires_in": expires_in})
    assert isinstance(error, AnswerUnusable) and "expires_in" in str(error)
    assert error.refresh_token == "rt-1"


def test_a_stated_lifetime_above_a_day_is_taken_as_a_day() -> None:
    absurd = answered({**GOOD, "expires_in": 10**12})
    assert absurd.expires_in == MAX_TOKEN_LIFETIME_SECONDS and absurd.lifetime_unsure
    assert answered({**GOOD, "expires_in": "120"}).expires_in == 120


@pytest.mark.parametrize(
    ("field", "value", "kept"),
    [
        ("access_token", "x" * (MAX_TOKEN_CHARS + 1), "rt-1"),  # more than a state file holds
        ("access_token", "at\r\nX-Injected: 1", "rt-1"),
        ("id_token", "y" * (MAX_TOKEN_CHARS + 1), "rt-1"),
        ("refresh_token", "rt\n1", None),  # the rotated one itself is unusable: nothing kept
        ("refresh_token", 42, None),
    ],
    ids=["huge-access", "header-injection", "huge-id-token", "refresh-newline", "refresh-number"],
)
def test_a_token_that_is_not_short_printable_text_is_unusable(
    field: str, value: Any, kept: str | None
) -> None:
    error = answered({**GOOD, field: value})
    assert isinstance(error, AnswerUnusable) and field in str(error)
    assert error.refresh_token == kept


def test_a_megabyte_access_token_is_taken() -> None:
    """Providers that pack a person's groups into the token make large ones: kept and served."""
    big = answered({**GOOD, "access_token": "A" * 1_000_000})
    assert len(big.access_token) == 1_000_000 and big.refresh_token == "rt-1"


def test_a_json_answer_that_does_not_parse_is_unusable_and_an_html_page_is_not_the_provider() -> (
    None
):
    cut, plain, portal = answered(
        json_answer(b'{"access_token": "at-1", "refresh_tok'),
        json_answer(b"internal error", "text/plain"),  # the endpoint's own, however odd
        json_answer("<html>Hotel Wi-Fi: accept the terms</html>", "text/html; charset=utf-8"),
    )
    assert isinstance(cut, AnswerUnusable) and "not JSON" in str(cut)
    assert isinstance(plain, AnswerUnusable) and "text/plain" in str(plain)
    assert isinstance(portal, ProviderUnavailable) and not isinstance(portal, AnswerLost)
    assert "text/html" in str(portal)


def test_an_answer_over_the_bound_is_not_read_further() -> None:
    sent = 0

    async def fifty_megabytes() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"padding": "'
        for _ in range(50 * 16):  # bounded: 50 MB in 64 KiB chunks (the bound is 8 MiB)
            sent += 1
            yield b"x" * 65536

    error = answered(
        httpx2.Response(
            200, headers={"content-type": "application/json"}, content=fifty_megabytes()
        )
    )
    assert isinstance(error, AnswerUnusable) and f"over {MAX_ANSWER_BYTES // 1024} KiB" in str(
        error
    )
    assert sent <= MAX_ANSWER_BYTES // 65536 + 2  # it stopped reading at the bound
    declared = answered(
        httpx2.Response(
            200,
            headers={"content-type": "application/json", "content-length": str(10**9)},
            content=b"{}",
        )
    )
    assert isinstance(declared, AnswerUnusable)


def trickle(chunks: list[bytes], gap: float) -> httpx2.Response:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            await asyncio.sleep(gap)
            yield chunk

    return httpx2.Response(200, headers={"content-type": "application/json"}, content=body())


def test_a_trickling_answer_is_read_while_the_bound_lasts_and_given_up_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The idle timeout (answer_within) is httpx2's read timeout, which a real socket
    enforces (tests/integration/test_slow_refresh_answers.py); here, the whole's bound."""
    monkeypatch.setattr(provider_module, "ANSWER_BOUND_SECONDS", 0.3)
    whole = json.dumps(GOOD).encode()
    slow = answered(trickle([whole[i : i + 8] for i in range(0, len(whole), 8)], 0.001), within=30)
    assert slow.access_token == "at-1"  # bytes kept coming within the bound: read whole
    endless = answered(trickle([b" "] * 200, 0.05), within=30)  # bounded loop: 10 s at most
    # The provider's success had begun (a JSON 200): it acted, and its answer is unusable.
    assert isinstance(endless, AnswerUnusable)
    assert "stopped half-way (no whole answer within 0.3 s)" in str(endless)
