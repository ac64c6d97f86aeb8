"""Writes the manual pages from the parsers: man/signin-broker.1 and man/signin-brokerd.1.

    python scripts/manpages.py [FOLDER]      # default: man/

The pages are committed and shipped in the wheel (share/man/man1); a test regenerates
them and fails when a parser changed without them. They are not made at build time
because the build's isolated environment lacks what the CLI's parsers import (the
conformance surfaces, for one).
"""

from __future__ import annotations

import sys
from pathlib import Path

from build_manpages.manpage import Manpage

from signin_broker.cli.table import full_parser
from signin_broker.daemon.settings import argument_parser

ROOT = Path(__file__).resolve().parents[1]
DATE = "2026-11-24"  # fixed, so the pages change only when a parser does


def pages() -> dict[str, str]:
    """The page of each program, by file name."""
    made = {}
    for name, parser, summary in (
        ("signin-broker", full_parser(), "ask the signin-broker daemon for tokens, sign in"),
        ("signin-brokerd", argument_parser(), "the per-user OpenID Connect sign-in daemon"),
    ):
        parser.prog = name
        page = str(
            Manpage(
                parser,
                _data={
                    "description": parser.description,
                    "project_name": "signin-broker",
                    "manual_title": "signin-broker manual",
                    "date": DATE,
                    "name": name,
                    "long_description": summary,
                },
            )
        )
        made[f"{name}.1"] = page
    return made


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, page in pages().items():
        (folder / file_name).write_text(page)
        print(folder / file_name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "man")
