"""JSON-lines log records carry the contract's fields at the top level."""

from __future__ import annotations

import json
import logging

import pytest

from signin_broker.daemon.logs import JsonLinesFormatter, Throttled


def render(level: int, msg: str, **extra: object) -> dict:
    record = logging.LogRecord("signin_broker.test", level, __file__, 1, msg, None, None)
    for key, value in extra.items():
        setattr(record, key, value)
    line = JsonLinesFormatter().format(record)
    assert "\n" not in line
    return json.loads(line)


def test_contract_fields_are_top_level_keys() -> None:
    entry = render(
        logging.WARNING, "callback state mismatch", flow="oauth", error_code="state_mismatch"
    )
    assert entry["flow"] == "oauth"
    assert entry["error_code"] == "state_mismatch"
    assert entry["severity"] == "warn"  # the contract's spelling
    assert entry["msg"] == "callback state mismatch"
    assert entry["ts"].endswith("Z")


def test_exceptions_stay_on_one_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    entry = json.loads(JsonLinesFormatter().format(record))
    assert "ValueError: boom" in entry["exception"]


def test_a_warning_others_can_repeat_is_logged_once_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    throttled = Throttled(logging.getLogger("t"), "refused", seconds=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t"):
        for _ in range(1000):
            throttled.warn(caller_uid=65534)
        now[0] += 61
        throttled.warn(caller_uid=65534)
    assert [getattr(record, "occurrences", None) for record in caplog.records] == [1, 1000]
