"""The documentation site as a browser gets it: nothing the reference says is swallowed, every
code block is one block with its language.

Markdown hands `<alias>` to the browser as a tag, which it drops: `[providers.<alias>]`
read `[providers.]`. These tests read the built HTML as a browser parses it.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType

import pytest

from support import site

REFERENCE = [
    "reference/settings.md",
    "reference/cli.md",
    "reference/api.md",
    "reference/statuses.md",
]
ANGLED = re.compile(r"<(?!!--)[^<>\n]{1,80}>")
HIGHLIGHTED = re.compile(r'<div class="language-([\w+-]+) highlight">')
PAGE_LINK = re.compile(r"\[[^\]\n]+\]\([^)\s]+\.md(#[^)\s]*)?\)")


class VisibleText(HTMLParser):
    """The text a browser shows (tags dropped, entities read), and that of the code blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.code: list[str] = []
        self._in_pre = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._in_pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        self._in_pre -= tag == "pre"

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_pre:
            self.code.append(data)


def read(path: Path) -> VisibleText:
    parser = VisibleText()
    parser.feed(path.read_text())
    return parser


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return site.built_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    return site.hooks()


def markdown_as_built(hooks: ModuleType, page: Path) -> str:
    return hooks.fill(page.read_text())


@pytest.mark.parametrize("page", REFERENCE)
def test_no_text_in_angle_brackets_is_lost_from_the_reference(
    built: Path, hooks: ModuleType, page: str
) -> None:
    source = html.unescape(markdown_as_built(hooks, site.DOCS / page))
    shown = "".join(read(site.html_of(built, site.DOCS / page)).text)
    written, seen = Counter(ANGLED.findall(source)), Counter(ANGLED.findall(shown))
    lost = {
        text: f"{seen[text]} of {times}" for text, times in written.items() if seen[text] < times
    }
    assert not lost, f"{page}: the browser shows {lost}"
    assert page.endswith("statuses.md") or written  # what every other page has


def blocks(markdown: str) -> Iterator[tuple[str, str]]:
    for fence in site.FENCE.finditer(markdown):
        yield fence["label"], fence["body"]


def test_every_code_block_is_fenced_with_its_language_and_renders_as_one_block(
    built: Path, hooks: ModuleType
) -> None:
    wrong = []
    for page in site.pages():
        labels = [label for label, _ in blocks(markdown_as_built(hooks, page))]
        rendered = HIGHLIGHTED.findall(site.html_of(built, page).read_text())
        if "" in labels or labels != rendered:
            wrong.append(f"{page.relative_to(site.ROOT)}: fenced {labels}, rendered {rendered}")
    assert not wrong, "\n".join(wrong)
    assert sum(len(HIGHLIGHTED.findall(p.read_text())) for p in built.rglob("*.html")) > 60


def test_no_code_block_holds_a_link_to_a_page(built: Path) -> None:
    linked = [
        f"{path.relative_to(built)}: {match.group()}"
        for path in built.rglob("*.html")
        for match in PAGE_LINK.finditer("".join(read(path).code))
    ]
    assert not linked, linked
