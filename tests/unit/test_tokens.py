"""TokenSet: when tokens want renewing (docs/contract.md §7), what a refresh changes and keeps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signin_broker.oidc.answers import TokenResponse
from signin_broker.session import schedule
from signin_broker.session.tokens import TokenSet
from support.fuzzing import FUZZ

ISSUED = 1_000_000.0


def sixty_seconds(**changes: Any) -> TokenSet:
    """T8's tokens: a 60 s access token with a refresh token, issued at ISSUED."""
    tokens = TokenSet(
        "at-0", "Bearer", ("openid", "email"), ISSUED, ISSUED + 60, "rt-0", id_token="id-0"
    )
    return replace(tokens, **changes)


def answer(refresh_token: str | None = "rt-1", **changes: Any) -> TokenResponse:
    response = TokenResponse("at-1", "Bearer", 3600, refresh_token, None, None)
    return replace(response, **changes)


@pytest.mark.parametrize(
    ("age", "due"), [(0, False), (44.9, False), (45, True), (50, True), (60, True), (61, True)]
)
def test_due_at_75_percent_of_the_lifetime(age: float, due: bool) -> None:
    tokens = sixty_seconds()
    assert tokens.is_due(ISSUED + age) is due
    assert tokens.wants_refresh(ISSUED + age) is due  # no min_ttl: the 75 % rule alone


@pytest.mark.parametrize(
    ("age", "seconds", "lasts"),
    [
        (10, 50, True),
        (10, 50.1, False),
        (0, 60, True),
        (59, 0, True),
        (60, 0, False),
        (70, 0, False),
    ],
)
def test_lasts_counts_the_seconds_left_and_never_past_expiry(
    age: float, seconds: float, lasts: bool
) -> None:
    assert sixty_seconds().lasts(ISSUED + age, seconds) is lasts
    assert sixty_seconds().is_valid(ISSUED + age) is (age < 60)


def test_a_min_ttl_the_token_cannot_meet_wants_a_refresh_before_it_is_due() -> None:
    tokens, now = sixty_seconds(), ISSUED + 10  # not due; 50 s left
    assert not tokens.wants_refresh(now, 50)
    assert tokens.wants_refresh(now, 51)


def test_the_background_renewal_comes_early_by_the_jitter_share_only() -> None:
    tokens = sixty_seconds()
    assert tokens.refresh_due_at() == ISSUED + 45
    early = schedule.REFRESH_JITTER_FRACTION  # 0.15: 9 s of 60 sooner
    assert tokens.refresh_due_at(early) == pytest.approx(ISSUED + 36)


def test_renewed_tokens_are_fresh_from_now_and_keep_what_the_answer_leaves_out() -> None:
    now = ISSUED + 50
    renewed = sixty_seconds(unanswered=1).renewed(answer(), now)
    assert (renewed.access_token, renewed.issued_at, renewed.expires_at) == (
        "at-1",
        now,
        now + 3600,
    )
    assert renewed.refresh_token == "rt-1"  # rotated
    assert renewed.scopes == ("openid", "email")  # the answer named none: as before
    assert renewed.id_token == "id-0"  # not re-sent: kept
    assert renewed.from_refresh
    assert not renewed.refresh_kept
    assert not renewed.refresh_in_doubt  # the new refresh token was never in doubt


def test_renewed_tokens_take_the_scopes_and_id_token_the_answer_names() -> None:
    renewed = sixty_seconds().renewed(answer(scope=("openid",), id_token="id-1"), ISSUED)
    assert (renewed.scopes, renewed.id_token) == (("openid",), "id-1")


@pytest.mark.parametrize("handed_back", [None, "rt-0"], ids=["left-out", "the-same"])
def test_a_refresh_token_not_rotated_is_kept_and_marked_kept(handed_back: str | None) -> None:
    renewed = sixty_seconds().renewed(answer(handed_back), ISSUED + 50)
    assert (renewed.refresh_token, renewed.refresh_kept) == ("rt-0", True)


def test_rotated_changes_the_refresh_token_only() -> None:
    tokens = sixty_seconds()
    rotated = tokens.rotated(answer("rt-9"))
    assert rotated == replace(
        tokens, refresh_token="rt-9", refresh_kept=False, refresh_rotates=True
    )
    assert tokens.rotated(answer(None)) == replace(tokens, refresh_kept=True)
    # Seen to rotate once, always taken to rotate: one it hands back is not "kept".
    again = rotated.rotated(answer(None))
    assert (again.refresh_token, again.refresh_kept, again.refresh_rotates) == ("rt-9", False, True)


def test_the_record_round_trips_without_from_refresh() -> None:
    """A restored token may be renewed once for a min_ttl: from_refresh is not stored."""
    tokens = sixty_seconds(unanswered=2, refresh_kept=True, from_refresh=True)
    assert TokenSet.from_record(tokens.to_record()) == replace(tokens, from_refresh=False)


texts = st.text(max_size=40)
instants = st.floats(min_value=0, max_value=2e10, allow_nan=False)


@settings(FUZZ, max_examples=50)
@given(
    st.builds(
        TokenSet,
        access_token=texts,
        token_type=texts,
        scopes=st.lists(texts, max_size=4).map(tuple),
        issued_at=instants,
        expires_at=instants,
        refresh_token=st.none() | texts,
        id_token=st.none() | texts,
        unanswered=st.integers(min_value=0, max_value=3),
        refresh_kept=st.booleans(),
    )
)
def test_any_token_set_round_trips_through_its_record(tokens: TokenSet) -> None:
    assert TokenSet.from_record(tokens.to_record()) == tokens


def test_a_record_from_before_the_flags_is_neither_in_doubt_nor_kept() -> None:
    record = sixty_seconds().to_record()
    del record["refresh_unanswered"], record["refresh_kept"]
    restored = TokenSet.from_record(record)
    assert not restored.refresh_in_doubt and not restored.refresh_kept


def test_a_record_from_before_the_count_that_said_in_doubt_is_one_send_unanswered() -> None:
    record = sixty_seconds().to_record()
    del record["refresh_unanswered"]
    restored = TokenSet.from_record({**record, "refresh_in_doubt": True})
    assert restored.unanswered == 1 and restored.refresh_in_doubt


def test_a_refresh_token_in_doubt_is_due_shortly_before_expiry() -> None:
    doubtful = sixty_seconds().sent()  # its first send lost its answer
    assert doubtful.refresh_due_at() == ISSUED + 60 - 15  # a quarter of 60 s < 60 s
    assert not doubtful.is_due(ISSUED + 44) and doubtful.is_due(ISSUED + 45)
    assert doubtful.sent().unanswered == 2 and doubtful.sent().refresh_due_at() == ISSUED + 45
    hour = TokenSet("a", "Bearer", (), ISSUED, ISSUED + 3600, "r").sent()
    assert hour.refresh_due_at() == ISSUED + 3600 - 60


def test_only_a_true_flag_puts_a_refresh_token_in_doubt() -> None:
    """A record edited by hand, or damaged, never makes a flag true by accident."""
    record = {**sixty_seconds().to_record(), "refresh_unanswered": "2", "refresh_kept": 1}
    restored = TokenSet.from_record(record)
    assert not restored.refresh_in_doubt and not restored.refresh_kept


def test_a_record_missing_a_field_is_refused() -> None:
    record = sixty_seconds().to_record()
    del record["access_token"]
    with pytest.raises(KeyError):
        TokenSet.from_record(record)


@pytest.mark.parametrize("field", ["scopes", "issued_at", "expires_at"])
def test_a_record_with_a_field_of_the_wrong_kind_is_refused(field: str) -> None:
    record = {**sixty_seconds().to_record(), field: None}
    with pytest.raises(TypeError):
        TokenSet.from_record(record)


def test_secrets_stay_out_of_repr() -> None:
    shown = repr(sixty_seconds())
    assert "at-0" not in shown and "rt-0" not in shown and "id-0" not in shown


def test_a_renewal_stating_an_absurd_lifetime_keeps_the_lifetime_tokens_had() -> None:
    absurd = replace(answer(), expires_in=86400, lifetime_unsure=True)  # 10**12, capped
    renewed = sixty_seconds().renewed(absurd, ISSUED + 50)
    assert renewed.expires_at == ISSUED + 50 + 60
