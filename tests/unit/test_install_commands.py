"""The docs install the files the build makes: every wheel and .deb they name is this version's.

No index serves the broker, so the pages name the files themselves (`pip install
dist/signin_broker-0.1.0-py3-none-any.whl`); a version bump without them would leave
commands that fail. tests/integration/test_service.py installs those wheels, and
scripts/check-deb that .deb, as the pages do.
"""

from __future__ import annotations

import re
from pathlib import Path

from signin_broker._version import __version__

REPO = Path(__file__).parents[2]
FILE_NAMES = re.compile(r"signin[_-]broker(?:_testing)?[-_][0-9][\w.+~-]*\.(?:whl|deb)")


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_every_package_file_the_docs_name_is_one_this_version_builds() -> None:
    wheels = {
        f"signin_broker-{__version__}-py3-none-any.whl",
        f"signin_broker_testing-{__version__}-py3-none-any.whl",
    }
    deb = re.compile(rf"signin-broker_{re.escape(__version__)}-1\+deb\d+_amd64\.deb")
    named = {
        (page.relative_to(REPO), name)
        for page in pages()
        for name in FILE_NAMES.findall(page.read_text())
    }
    assert any(name.endswith(".deb") for _, name in named)
    assert {name for _, name in named} >= wheels
    for page, name in named:
        assert name in wheels or deb.fullmatch(name), f"{page} names {name}: no build makes it"


def test_no_page_installs_from_an_index_that_has_no_broker() -> None:
    for page in pages():
        for line in page.read_text().splitlines():
            assert not re.search(r"pip install\s+['\"]?signin-broker\b", line), f"{page}: {line}"
