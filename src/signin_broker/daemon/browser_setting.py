"""The `browsers` setting: browser executables, besides the known ones, that may start the host.

Read here, at the bottom of the daemon, so the settings can check it; callers/browsers.py
decides with it which callers are browser extensions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

BROWSER_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")  # as in `browser:<name>/<extension id>`

BROWSERS_HELP = (
    "more browser executables whose native messaging hosts get tokens, as NAME=PATH"
    " (comma-separated; a list in TOML), the path of the browser's main process as"
    " /proc/<pid>/exe names it; Chromium, Chrome and Firefox as distributions install"
    " them are known already"
)


def parse_browsers(value: object) -> tuple[tuple[str, str], ...]:
    """The `browsers` setting: (name, absolute executable path) pairs; ValueError says why not."""
    if isinstance(value, str):
        items: list[object] = [item for item in value.split(",") if item.strip()]
    elif isinstance(value, list):
        items = value
    else:
        raise ValueError(  # noqa: TRY004 - the settings catch ValueError, once
            "must be NAME=PATH pairs, comma-separated, or a list of them"
        )
    pairs = []
    for item in items:
        name, equals, path = str(item).strip().partition("=")
        if not equals or not BROWSER_NAME.fullmatch(name) or not Path(path).is_absolute():
            raise ValueError(
                f"{str(item)[:80]!r} is not NAME=PATH (a name of lower-case letters, digits"
                " and -, and the absolute path of the browser's executable)"
            )
        pairs.append((name, os.path.normpath(path)))
    return tuple(pairs)
