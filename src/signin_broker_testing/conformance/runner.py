"""Runs the cases of one surface, each on its own stage, several at once.

A case's stage is independent of every other's, so cases run side by side: the two
that wait on the clock (T8 waits 50 s; I2 up to 60 s) start first and the rest run
beside them. Every wait inside a case is bounded, so a run always ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from .cases import CASES, Case
from .registry import FAIL, PASS, SKIP, Outcome
from .stage import Skip, Stage, Target
from .surfaces import Surface

SLOW_FIRST = ("T8", "I2")
# The cases against the given provider take turns, whatever their surface: I2 revokes
# the test user's sessions there, which would end another surface's I1 or I2 beside it.
_GIVEN_PROVIDER_TURN = threading.Lock()
MAX_REASON_LENGTH = 300

Progress = Callable[[str, str, Outcome, float], None]  # surface, case id, outcome, seconds


def run_case(case: Case, surface: Surface, target: Target) -> Outcome:
    """One case on a fresh stage; the outcome, with the reason for anything but PASS."""
    if case.given_provider and not target.issuer:
        return Outcome(SKIP, "no --issuer given: this case runs against a staging provider")
    if case.given_provider:
        with _GIVEN_PROVIDER_TURN:
            return _on_a_stage(case, surface, target)
    return _on_a_stage(case, surface, Target())  # the stub: nothing of the given provider


def _on_a_stage(case: Case, surface: Surface, target: Target) -> Outcome:
    try:
        stage = Stage(target)
    except Exception as error:  # any failure to set up is this case's failure
        return Outcome(FAIL, _reason("could not set up", error))
    try:
        case.run(stage, surface)
        outcome = Outcome(PASS)
    except Skip as skipped:
        outcome = Outcome(SKIP, str(skipped))
    except Exception as error:  # a case fails however it breaks
        outcome = Outcome(FAIL, _reason("", error))
    try:
        stage.close()
    except Exception as error:  # a daemon that will not stop fails the case it served
        return Outcome(FAIL, _reason("after the case", error))
    return outcome


def run_surface(
    surface: Surface, target: Target, ids: Iterable[str], workers: int, progress: Progress
) -> dict[str, Outcome]:
    """Run the chosen cases on one surface; their outcomes by case id."""
    chosen = sorted(
        ids, key=lambda case_id: (case_id not in SLOW_FIRST, list(CASES).index(case_id))
    )

    def timed(case_id: str) -> Outcome:
        started = time.monotonic()
        outcome = run_case(CASES[case_id], surface, target)
        progress(surface.name, case_id, outcome, time.monotonic() - started)
        return outcome

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=surface.name) as pool:
        outcomes = dict(zip(chosen, pool.map(timed, chosen), strict=True))
    return {case_id: outcomes[case_id] for case_id in CASES if case_id in outcomes}


def _reason(prefix: str, error: Exception) -> str:
    """One line saying what broke: the case's own words, or the exception's type and text."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if not isinstance(error, AssertionError):
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    text = f"{prefix}: {text}" if prefix else text
    return text[:MAX_REASON_LENGTH] or "failed"
