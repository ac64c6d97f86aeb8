"""The refresh timing policy: jitter in its bounds, re-validation within 60 s, capped backoff."""

from __future__ import annotations

import random

import pytest

from signin_broker.session import schedule
from signin_broker.session.tokens import TokenSet

NOW = 1_000_000.0


class Extreme:
    """A stand-in for the random module whose every draw is one end of the range."""

    def __init__(self, end: str) -> None:
        self.end = end

    def uniform(self, low: float, high: float) -> float:
        return low if self.end == "lowest" else high


@pytest.fixture(params=["lowest", "highest"])
def draw(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every draw of the schedule at one end of its range; which end."""
    monkeypatch.setattr(schedule, "random", Extreme(request.param))
    return str(request.param)


@pytest.fixture
def seeded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real draws, but repeatable, from a generator of the test's own."""
    monkeypatch.setattr(schedule, "random", random.Random(0))


def test_the_renewal_head_start_is_at_most_the_jitter_share(draw: str) -> None:
    expected = {"lowest": 0.0, "highest": schedule.REFRESH_JITTER_FRACTION}[draw]
    assert schedule.refresh_early_fraction() == expected


def test_a_background_renewal_comes_between_60_and_75_percent_of_the_lifetime(draw: str) -> None:
    tokens = TokenSet("at", "Bearer", (), NOW, NOW + 100, "rt")
    due = tokens.refresh_due_at(schedule.refresh_early_fraction())
    assert due == pytest.approx({"lowest": NOW + 75, "highest": NOW + 60}[draw])


def test_re_validation_comes_late_enough_for_one_request_a_minute_and_early_enough(
    draw: str,
) -> None:
    """Contract I2: a revocation shows within 60 s, counting the provider's answer time.

    With userinfo answering in 0.3 s the next check starts 60 - (1 + 2 * 0.3) = 58.4 s
    after the last, spread down by up to a tenth: about one request a minute.
    """
    expected = {"lowest": NOW + 58.4 * 0.9, "highest": NOW + 58.4}[draw]
    assert schedule.next_revalidation(NOW, 60, answer_seconds=0.3) == pytest.approx(expected)


def test_a_restored_session_is_re_validated_within_one_period(draw: str) -> None:
    expected = {"lowest": NOW, "highest": NOW + 57}[draw]  # an answer time not yet timed: 1 s
    assert schedule.first_revalidation(NOW, 60) == pytest.approx(expected)


@pytest.mark.parametrize("answer_seconds", [0.0, 0.3, 2.0, 10.0, 29.0, 100.0])
@pytest.mark.parametrize("bound", [1, 5, 30, 60])
def test_the_next_check_has_its_answer_within_the_bound(bound: int, answer_seconds: float) -> None:
    """A revocation right after a check is seen by the next one, answered within the bound
    as long as the provider answers no slower than twice its usual time; a provider slower
    than half the bound gets a check every half bound."""
    period = schedule.revalidation_period(bound, answer_seconds)
    assert 0 < period <= bound / 2 or period + 2 * answer_seconds + 1 <= bound
    assert period >= bound / 2


@pytest.mark.usefixtures("seeded")
def test_backoff_doubles_from_one_second_to_a_minute() -> None:
    delays = [schedule.retry_after_failure(NOW, failures) - NOW for failures in range(1, 10)]
    nominal = [1, 2, 4, 8, 16, 32, 60, 60, 60]
    for delay, expected in zip(delays, nominal, strict=True):
        assert 0.8 * expected <= delay <= 1.2 * expected


@pytest.mark.parametrize("failures", [7, 64, 1024])
def test_backoff_never_exceeds_a_minute_and_its_jitter(draw: str, failures: int) -> None:
    factor = {"lowest": 0.8, "highest": 1.2}[draw]
    expected = NOW + factor * schedule.BACKOFF_MAX_SECONDS
    assert schedule.retry_after_failure(NOW, failures) == pytest.approx(expected)


def test_backoff_after_a_day_of_failures_is_still_a_minute(draw: str) -> None:
    factor = {"lowest": 0.8, "highest": 1.2}[draw]
    expected = NOW + factor * schedule.BACKOFF_MAX_SECONDS
    assert schedule.retry_after_failure(NOW, 1440) == pytest.approx(expected)


@pytest.mark.usefixtures("seeded")
def test_the_jitter_spreads_a_fleet() -> None:
    """A thousand devices signed in the same second do not renew in the same second."""
    starts = [schedule.refresh_early_fraction() for _ in range(1000)]
    assert len({round(start, 3) for start in starts}) > 100
    assert all(0 <= start <= schedule.REFRESH_JITTER_FRACTION for start in starts)
