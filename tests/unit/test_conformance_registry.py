"""The coverage registry summarizes runs, keeps lines whole, and renders a grid that says why."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from signin_broker_testing.conformance.registry import (
    CASE_IDS,
    FAIL,
    PASS,
    SKIP,
    Outcome,
    RegistryError,
    Row,
    append,
    html_grid,
    latest,
    read,
    summarize,
    terminal_grid,
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def outcomes(status: str, ids: tuple[str, ...] = CASE_IDS) -> dict[str, Outcome]:
    return {case: Outcome(status) for case in ids}


def row(surface: str = "web", component: str = "broker", note: str = "", **cases: Outcome) -> Row:
    return Row.new(component, surface, {**outcomes(PASS), **cases}, note=note, date="2025-06-01")


def test_case_ids_cover_every_group_in_order() -> None:
    assert CASE_IDS[:3] == ("T1", "T2", "T3")
    assert CASE_IDS[7:12] == ("T8", "I1", "I2", "I3", "N1")
    assert CASE_IDS[-1] == "N4"
    assert len(CASE_IDS) == 15


def test_summarize_all_pass() -> None:
    assert summarize(outcomes(PASS)) == "T1-T8 PASS, I1-I3 PASS, N1-N4 PASS"


def test_summarize_all_skip_and_not_run_read_as_skip() -> None:
    assert summarize(outcomes(SKIP)) == "T1-T8 SKIP, I1-I3 SKIP, N1-N4 SKIP"
    assert summarize({}) == "T1-T8 SKIP, I1-I3 SKIP, N1-N4 SKIP"


def test_summarize_lists_the_failures_of_a_group() -> None:
    cases = {**outcomes(PASS), "T3": Outcome(FAIL, "no token"), "T5": Outcome(FAIL, "late")}
    cases["I1"] = Outcome(SKIP)
    assert summarize(cases) == "T1-T8 FAIL (T3, T5), I1-I3 PASS (I1 SKIP), N1-N4 PASS"


def test_summarize_a_mix_lists_skipped_and_not_run() -> None:
    cases = {**outcomes(PASS), "I1": Outcome(SKIP, "no second user")}
    del cases["I2"]
    for case in ("T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"):
        cases[case] = Outcome(SKIP)
    assert summarize(cases) == "T1-T8 SKIP, I1-I3 PASS (I1, I2 SKIP), N1-N4 PASS"


def test_new_fills_today_and_the_summary() -> None:
    made = Row.new("broker", "cli", outcomes(PASS))
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", made.date)
    assert made.summary == summarize(outcomes(PASS))
    assert made.note == ""


def test_failed_lists_failures_in_case_order() -> None:
    made = row(N2=Outcome(FAIL), T4=Outcome(FAIL), I1=Outcome(SKIP))
    assert made.failed() == ["T4", "N2"]


def test_json_round_trip() -> None:
    original = row(note="café\nline\u2028sep", T3=Outcome(FAIL, 'said "no" <b>'), I2=Outcome(SKIP))
    line = original.to_json()
    assert "\n" not in line
    assert list(json.loads(line)) == ["date", "component", "surface", "summary", "note", "cases"]
    assert json.loads(line)["cases"]["T3"] == {"status": FAIL, "reason": 'said "no" <b>'}
    assert Row.from_json(line) == original


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"component": "b"}', "'date'"),
        ("BAD_SURFACE", "'surface'"),
        ("BAD_DATE", "YYYY-MM-DD"),
        ("IMPOSSIBLE_DATE", "not a real date"),
        ("BAD_STATUS", "unknown status 'MAYBE'"),
        ("NO_CASES", "'cases'"),
    ],
)
def test_from_json_refuses_malformed_lines(line: str, message: str) -> None:
    good = json.loads(row().to_json())
    broken = {
        "BAD_SURFACE": {**good, "surface": 3},
        "BAD_DATE": {**good, "date": "01/06/2025"},
        "IMPOSSIBLE_DATE": {**good, "date": "2025-13-40"},
        "BAD_STATUS": {**good, "cases": {"T1": {"status": "MAYBE", "reason": ""}}},
        "NO_CASES": {key: value for key, value in good.items() if key != "cases"},
    }
    if line in broken:
        line = json.dumps(broken[line])
    with pytest.raises(RegistryError, match=re.escape(message)):
        Row.from_json(line)


def test_append_twice_and_read_back_in_order(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "registry.jsonl"
    first, second = row("web"), row("cli", T1=Outcome(FAIL, "boom"))
    append(path, first)
    append(path, second)
    assert read(path) == [first, second]
    assert path.read_text().count("\n") == 2


def test_read_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read(tmp_path / "none.jsonl") == []


def test_read_names_the_file_and_line_of_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "registry.jsonl"
    path.write_text(row().to_json() + "\n" + '{"torn": \n' + row().to_json() + "\n")
    with pytest.raises(RegistryError, match=rf"{re.escape(str(path))}, line 2: not JSON"):
        read(path)


def test_latest_keeps_the_last_row_per_surface_in_display_order() -> None:
    old_web = row("web", T1=Outcome(FAIL))
    new_web = row("web")
    rows = [old_web, row("tv"), row("kiosk"), row("cli"), row("desktop"), new_web]
    rows.append(row("web", component="another"))
    result = latest(rows)
    assert [(r.component, r.surface) for r in result] == [
        ("another", "web"),
        ("broker", "web"),
        ("broker", "cli"),
        ("broker", "desktop"),
        ("broker", "tv"),
        ("broker", "kiosk"),
    ]
    assert result[1] is new_web


def test_terminal_grid_colors_a_failed_cell_red() -> None:
    grid = terminal_grid([row(T3=Outcome(FAIL, "token refused"))], color=True)
    assert "\x1b[31mFAIL\x1b[0m" in grid
    assert "\x1b[32mPASS\x1b[0m" in grid
    assert "  web T3 FAIL: token refused" in grid


def test_terminal_grid_columns_line_up_plain_and_colored() -> None:
    rows = [
        row("web", component="a-long-component", T3=Outcome(FAIL, "refused")),
        row("desktop", I2=Outcome(SKIP, "no second user")),
        Row.new("x", "tv", {"T1": Outcome(PASS)}, date="2025-06-02"),
    ]
    plain = terminal_grid(rows, color=False)
    table = plain.split("\n\n")[0].splitlines()
    assert len(table) == 4
    header = table[0]
    for column in ("SURFACE", "DATE", *CASE_IDS, "SUMMARY"):
        start = re.search(rf"\b{column}\b", header)
        assert start is not None
        for line in table[1:]:
            assert line[start.start() - 1] == " " and line[start.start()] != " ", (column, line)
    assert table[3].split()[3:6] == ["PASS", "-", "-"]
    colored = terminal_grid(rows, color=True)
    assert ANSI.sub("", colored) == plain
    assert plain.rstrip().splitlines()[-2:] == [
        "  web T3 FAIL: refused",
        "  desktop I2 SKIP: no second user",
    ]


def test_terminal_grid_spells_out_control_characters() -> None:
    grid = terminal_grid([row(T1=Outcome(FAIL, "\x1b[2Jgone\nline"))], color=False)
    assert "\x1b" not in grid
    assert "  web T1 FAIL: \\x1b[2Jgone\\nline" in grid


def test_html_grid_marks_a_failed_case_and_escapes_the_note() -> None:
    page = html_grid(
        [
            row(
                component='<img src=x onerror="a()">',
                note="<script>alert(1)</script>",
                T2=Outcome(FAIL, 'said "no" & left'),
                N1=Outcome(SKIP),
            ),
            Row.new("b", "cli", {}, date="2025-06-01"),
        ]
    )
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>signin-broker conformance grid</title>" in page
    assert '<td class="fail" title="said &quot;no&quot; &amp; left">FAIL</td>' in page
    assert '<td class="pass">PASS</td>' in page
    assert '<td class="skip">SKIP</td>' in page
    assert '<td class="none">-</td>' in page
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page
    assert "http" not in page.replace('http-equiv="Content-Security-Policy"', "")
    assert "<th>NOTE</th>" in page
