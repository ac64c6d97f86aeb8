"""The architecture page's source map names every room of the package, and only real files."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "src" / "signin_broker"
ENTRY = re.compile(r"^ {2}(\S+) {2,}(.*)$")  # "  daemon/       the process: ..."
MORE = re.compile(r"^ {16}(\S.*)$")  # its continuation lines
MODULE = re.compile(r"\b\w+\.py\b")


def source_map() -> dict[str, str]:
    """Each entry under `src/signin_broker/` in the source map, with its whole description."""
    lines = (ROOT / "docs" / "explanation" / "architecture.md").read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("src/signin_broker/"))
    entries: dict[str, str] = {}
    name = ""
    for line in lines[start + 1 :]:
        if entry := ENTRY.match(line):
            name = entry[1]
            entries[name] = entry[2]
        elif (more := MORE.match(line)) and name:
            entries[name] += " " + more[1]
        else:
            break
    return entries


def test_every_package_and_top_level_module_is_on_the_map() -> None:
    tree = {
        f"{path.name}/" if path.is_dir() else path.name
        for path in PACKAGE.iterdir()
        if (path.is_dir() and path.name != "__pycache__")
        or (path.suffix == ".py" and path.stem != "__init__")
    }
    assert set(source_map()) == tree


def test_the_files_the_map_names_exist_in_their_package() -> None:
    missing = [
        f"{name}{module}"
        for name, text in source_map().items()
        if name.endswith("/")
        for module in MODULE.findall(text)
        if not any((PACKAGE / name).rglob(module))
    ]
    assert missing == []
