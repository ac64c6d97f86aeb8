"""The coverage registry: one JSON line per conformance run, shown as a surfaces x cases grid.

Release engineering gates on a green grid, so a row records every case's outcome and its
reason, and the grid shows why a cell is not green. Rows are only ever appended, so several
surfaces can record their runs into the same file at once.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GROUPS: tuple[tuple[str, int], ...] = (("T", 8), ("I", 3), ("N", 4))
CASE_IDS: tuple[str, ...] = tuple(
    f"{prefix}{number}" for prefix, count in GROUPS for number in range(1, count + 1)
)

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
_STATUSES = (PASS, FAIL, SKIP)

SURFACES: tuple[str, ...] = ("web", "cli", "desktop", "tv", "tui", "backend")

_NOT_RUN = "-"
_CELL_WIDTH = 4
_RESET = "\x1b[0m"
_COLORS = {PASS: "\x1b[32m", FAIL: "\x1b[31m", SKIP: "\x1b[33m"}

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_TEXT_FIELDS = ("date", "component", "surface", "summary", "note")


class RegistryError(ValueError):
    """A registry line or outcome that cannot be trusted; the message says what is wrong."""


@dataclass(frozen=True)
class Outcome:
    """How one case went; the reason tells a person why it failed or was skipped."""

    status: str
    reason: str = ""

    def __post_init__(self) -> None:
        """Refuse an unknown status, so the grid never has to guess what a cell means."""
        if self.status not in _STATUSES:
            raise RegistryError(f"unknown status {self.status!r}, expected one of {_STATUSES}")


@dataclass(frozen=True)
class Row:
    """One conformance run of one component on one surface; a case missing was not run."""

    date: str
    component: str
    surface: str
    summary: str
    note: str
    cases: dict[str, Outcome]

    @classmethod
    def new(
        cls,
        component: str,
        surface: str,
        cases: Mapping[str, Outcome],
        note: str = "",
        date: str | None = None,
    ) -> Row:
        """A row for a run that just finished: dated today (UTC) and summarized."""
        return cls(
            date=date if date is not None else dt.datetime.now(dt.UTC).date().isoformat(),
            component=component,
            surface=surface,
            summary=summarize(cases),
            note=note,
            cases=dict(cases),
        )

    def failed(self) -> list[str]:
        """The failed case ids, in CASE_IDS order, for a gate's message."""
        return [case for case in CASE_IDS if _status(self.cases, case) == FAIL]

    def to_json(self) -> str:
        """One line of the registry (ASCII only, so no character can split the line)."""
        return json.dumps(
            {
                "date": self.date,
                "component": self.component,
                "surface": self.surface,
                "summary": self.summary,
                "note": self.note,
                "cases": {
                    case: {"status": outcome.status, "reason": outcome.reason}
                    for case, outcome in self.cases.items()
                },
            }
        )

    @classmethod
    def from_json(cls, line: str) -> Row:
        """Parse one registry line, refusing anything a hand edit or a torn write could leave."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise RegistryError(f"not JSON: {error}") from error
        if not isinstance(data, dict):
            raise RegistryError("not a JSON object")
        text = {field: _text(data, field, "row") for field in _TEXT_FIELDS}
        if not _ISO_DATE.fullmatch(text["date"]):
            raise RegistryError(f"date {text['date']!r} is not YYYY-MM-DD")
        try:
            dt.date.fromisoformat(text["date"])
        except ValueError as error:
            raise RegistryError(f"date {text['date']!r} is not a real date") from error
        cases = data.get("cases")
        if not isinstance(cases, dict):
            raise RegistryError("field 'cases' is missing or not an object")
        return cls(
            date=text["date"],
            component=text["component"],
            surface=text["surface"],
            summary=text["summary"],
            note=text["note"],
            cases=_outcomes(cases),
        )


def _text(data: dict[str, Any], field: str, where: str) -> str:
    """A required string field, or a RegistryError naming it."""
    value = data.get(field)
    if not isinstance(value, str):
        raise RegistryError(f"field {field!r} of the {where} is missing or not a string")
    return value


def _outcomes(cases: dict[str, Any]) -> dict[str, Outcome]:
    """The parsed 'cases' object of a registry line."""
    outcomes: dict[str, Outcome] = {}
    for case, value in cases.items():
        if not isinstance(value, dict):
            raise RegistryError(f"case {case!r} is not an object")
        where = f"case {case!r}"
        outcomes[case] = Outcome(_text(value, "status", where), _text(value, "reason", where))
    return outcomes


def _status(cases: Mapping[str, Outcome], case: str) -> str:
    """A case's status, or "-" when the run did not include it."""
    outcome = cases.get(case)
    return outcome.status if outcome is not None else _NOT_RUN


def _group_summary(prefix: str, count: int, cases: Mapping[str, Outcome]) -> str:
    """One group's part of the summary, e.g. "T1-T8 FAIL (T3, T5)"."""
    ids = [f"{prefix}{number}" for number in range(1, count + 1)]
    label = f"{ids[0]}-{ids[-1]}"
    failed = [case for case in ids if _status(cases, case) == FAIL]
    if failed:
        return f"{label} {FAIL} ({', '.join(failed)})"
    not_passed = [case for case in ids if _status(cases, case) != PASS]
    if not not_passed:
        return f"{label} {PASS}"
    if len(not_passed) == len(ids):
        return f"{label} {SKIP}"
    return f"{label} {PASS} ({', '.join(not_passed)} {SKIP})"


def summarize(cases: Mapping[str, Outcome]) -> str:
    """A run in one line, e.g. "T1-T8 PASS, I1-I3 SKIP, N1-N4 PASS"; not run counts as skipped."""
    return ", ".join(_group_summary(prefix, count, cases) for prefix, count in GROUPS)


def append(path: Path, row: Row) -> None:
    """Add a row with one unbuffered write in append mode, so concurrent runs never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab", buffering=0) as registry:
        registry.write((row.to_json() + "\n").encode("ascii"))


def read(path: Path) -> list[Row]:
    """Every row in file order; a missing file is an empty registry, a bad line an error."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    rows: list[Row] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            rows.append(Row.from_json(raw.decode("utf-8")))
        except (UnicodeDecodeError, RegistryError) as error:
            raise RegistryError(f"{path}, line {number}: {error}") from error
    return rows


def _surface_order(surface: str) -> tuple[int, str]:
    """Known surfaces in display order, then the others by name."""
    known = SURFACES.index(surface) if surface in SURFACES else len(SURFACES)
    return known, surface


def latest(rows: Iterable[Row]) -> list[Row]:
    """The last row of each (component, surface): what the grid and the gate look at."""
    last = {(row.component, row.surface): row for row in rows}
    return sorted(last.values(), key=lambda row: (row.component, *_surface_order(row.surface)))


def _printable(text: str) -> str:
    """Text safe for a terminal: control characters (escape sequences, newlines) spelled out."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _cell(status: str, color: bool) -> str:
    """One case cell, padded on its visible text so colored columns stay aligned."""
    padding = " " * (_CELL_WIDTH - len(status))
    if color and status in _COLORS:
        return f"{_COLORS[status]}{status}{_RESET}{padding}"
    return status + padding


def _padded(texts: Sequence[str], widths: Sequence[int]) -> list[str]:
    """Texts left-aligned to their column widths."""
    return [text.ljust(width) for text, width in zip(texts, widths, strict=True)]


def terminal_grid(rows: Sequence[Row], color: bool) -> str:
    """The grid as a plain-text table, followed by why each failed or skipped case was not green."""
    table = [
        ["COMPONENT", "SURFACE", "DATE"],
        *(
            [_printable(row.component), _printable(row.surface), _printable(row.date)]
            for row in rows
        ),
    ]
    widths = [max(len(line[column]) for line in table) for column in range(3)]
    header = " ".join(case.ljust(_CELL_WIDTH) for case in CASE_IDS)
    lines = ["  ".join([*_padded(table[0], widths), header, "SUMMARY"])]
    for row, text in zip(rows, table[1:], strict=True):
        cells = " ".join(_cell(_status(row.cases, case), color) for case in CASE_IDS)
        lines.append("  ".join([*_padded(text, widths), cells, _printable(row.summary)]))
    reasons = [
        f"  {_printable(row.surface)} {case} {outcome.status}"
        + (f": {_printable(outcome.reason)}" if outcome.reason else "")
        for row in rows
        for case in CASE_IDS
        if (outcome := row.cases.get(case)) is not None and outcome.status in (FAIL, SKIP)
    ]
    if reasons:
        lines += ["", *reasons]
    return "\n".join(lines) + "\n"


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 0.25em 0.5em; text-align: left; }
th { background: #eee; }
td.pass { background: #b7e1b7; }
td.fail { background: #e05252; color: #fff; font-weight: bold; }
td.skip { background: #ffc94d; }
td.none { background: #f4f4f4; color: #888; text-align: center; }
"""

_HTML_CLASSES = {PASS: "pass", FAIL: "fail", SKIP: "skip"}


def _esc(text: str) -> str:
    """HTML-escape text from a row: component, note and reasons come from whoever ran the cases."""
    return html.escape(text, quote=True)


def _html_cell(outcome: Outcome | None) -> str:
    """One case cell, with the reason as a tooltip so the page says why."""
    if outcome is None:
        return f'<td class="none">{_NOT_RUN}</td>'
    title = f' title="{_esc(outcome.reason)}"' if outcome.reason else ""
    return f'<td class="{_HTML_CLASSES[outcome.status]}"{title}>{_esc(outcome.status)}</td>'


def html_grid(rows: Sequence[Row]) -> str:
    """The grid as a self-contained HTML page: inline CSS only, and a policy forbidding scripts."""
    head = "".join(
        f"<th>{name}</th>"
        for name in ("COMPONENT", "SURFACE", "DATE", *CASE_IDS, "SUMMARY", "NOTE")
    )
    body = [
        "<tr>"
        + "".join(f"<td>{_esc(text)}</td>" for text in (row.component, row.surface, row.date))
        + "".join(_html_cell(row.cases.get(case)) for case in CASE_IDS)
        + f"<td>{_esc(row.summary)}</td><td>{_esc(row.note)}</td></tr>"
        for row in rows
    ]
    title = "signin-broker conformance grid"
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta http-equiv="Content-Security-Policy"'
            " content=\"default-src 'none'; style-src 'unsafe-inline'\">",
            f"<title>{title}</title>",
            f"<style>{_STYLE}</style>",
            "</head>",
            "<body>",
            f"<h1>{title}</h1>",
            "<table>",
            f"<thead><tr>{head}</tr></thead>",
            "<tbody>",
            *body,
            "</tbody>",
            "</table>",
            "</body>",
            "</html>",
            "",
        ]
    )
