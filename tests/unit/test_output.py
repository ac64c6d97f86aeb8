"""Human output helpers of the CLI."""

from __future__ import annotations

from signin_broker.cli._output import duration, key_values, table


def test_duration_is_rough_and_readable() -> None:
    assert [duration(s) for s in (0, 45, 60, 192, 3600, 7500, 90000)] == [
        "0s",
        "45s",
        "1m",
        "3m 12s",
        "1h",
        "2h 5m",
        "1d 1h",
    ]


def test_table_aligns_columns() -> None:
    assert table(["A", "LONGER"], [["xyz", "1"], ["q", "22"]]).splitlines() == [
        "A    LONGER",
        "xyz  1",
        "q    22",
    ]


def test_key_values_pads_names() -> None:
    assert key_values([("a", "1"), ("long", "2")]) == "a     1\nlong  2"
