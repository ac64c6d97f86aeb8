"""The fenced code blocks of a docs page, so a test runs what the page tells a person to run.

A page that lies then fails like a function that does: the test takes the page's own
blocks and changes only what must differ on a test machine (paths, addresses), named
in the test.
"""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: str, heading: str = "", language: str = "") -> list[str]:
    """The blocks of docs/`page` (in `language`, if named) under `heading` (a `## ` title).

    Under a heading: from it to the next heading of the same or a higher level (a line
    in a block that starts with "#" is no heading).
    """
    text = (DOCS / page).read_text()
    if heading:
        text = _section(text, heading)
    return [body for lang, body in FENCE.findall(text) if not language or lang == language]


def _section(text: str, heading: str) -> str:
    level, lines, inside, fenced = heading.split(" ", 1)[0], [], False, False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.rstrip("\n") == heading:
            inside = True
        elif not fenced and inside and re.match(rf"#{{1,{len(level)}}} ", line):
            break
        if inside:
            lines.append(line)
    assert lines, f"no heading {heading!r}"
    return "".join(lines)


def replaced(text: str, changes: dict[str, str]) -> str:
    """The text with each of `changes` made; AssertionError for one the text lacks."""
    for old, new in changes.items():
        assert old in text, f"the page no longer has {old!r}"
        text = text.replace(old, new)
    return text
