"""The start page's five-minute path, as its reader types it: `signin-broker try`, then a session.

docs/start/first-sign-in.md shows `signin-broker try` in a block of its own, then the
session in its shell as a `console` block (`$ ` before each command, the output after).
The tests of the dev tree and of the wheel, and scripts/check-deb for the Debian package,
run that session's commands as written, in `signin-broker try sh -c SCRIPT`, with a
scripted browser where a person would click (SIGNIN_BROKER_BROWSER), and check what the
page says they print.

    python tests/support/five_minutes.py             # prints SCRIPT (scripts/check-deb)
    python tests/support/five_minutes.py check FILE  # FILE: what it printed, stderr too
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).parents[2] / "docs" / "start" / "first-sign-in.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What a person's browser does for the stub, which approves without asking.
BROWSER = "python -m signin_broker_testing.browser"


def blocks() -> list[tuple[str, str]]:
    """The page's fenced blocks: (language, text)."""
    return [(match[1], match[2]) for match in BLOCK.finditer(PAGE.read_text())]


def session() -> list[tuple[str, list[str]]]:
    """The commands of the session in try's shell, each with the lines the page shows it print."""
    found = blocks()
    start = found.index(("sh", "signin-broker try\n"))
    language, text = found[start + 1]
    assert language == "console", f"{PAGE}: the try session is no console block"
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    return steps


def script() -> str:
    """The session's commands as one script for `sh -c`: it stops at the first that fails."""
    return "set -e\n" + "\n".join(command for command, _ in session()) + "\n"


def _pattern(shown: str) -> re.Pattern[str]:
    """A line as the page shows it: `...` stands for anything, a loopback port for any."""
    if re.fullmatch(r"[A-Za-z0-9_-]{20,}", shown):  # a bare token: the page's is an example
        return re.compile(r"[A-Za-z0-9_.~+/=-]{16,}")
    text = re.escape(shown).replace(re.escape("..."), ".+")
    return re.compile(re.sub(r"(127\\\.0\\\.0\\\.1:)\d+", r"\1\\d+", text))


def mismatch(output: str) -> str:
    """ "" when the output (stdout and stderr as one) shows the page's lines in order, else why."""
    lines = iter(output.splitlines())
    for command, shown in session():
        for expected in shown:
            pattern = _pattern(expected)
            if not any(pattern.fullmatch(line) for line in lines):
                return f"after `{command}`, no line like {expected!r} in:\n{output}"
    return ""


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        sys.exit(mismatch(Path(sys.argv[2]).read_text()) or None)
    sys.stdout.write(script())
