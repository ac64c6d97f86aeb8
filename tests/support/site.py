"""The documentation site as tests read it: the build hook, each page's Markdown as built, the site.

scripts/check builds the site before the tests (`mkdocs build --strict`) and names the
folder in SIGNIN_BROKER_TEST_BUILT_SITE; without it the site is built here, once per module
that asks (a few seconds).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
BUILT = "SIGNIN_BROKER_TEST_BUILT_SITE"
# An opening fence and its label: ```console, ```sh; indented inside a list item too.
FENCE = re.compile(
    r"^(?P<indent> *)```(?P<label>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S
)


def hooks() -> ModuleType:
    """scripts/docs_hooks.py, the MkDocs hook that draws the reference pages from the code."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def built_site(folder: Path) -> Path:
    """The site scripts/check built, or one built now into `folder`."""
    if os.environ.get(BUILT):
        return Path(os.environ[BUILT])
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return folder


def html_of(site: Path, page: Path) -> Path:
    """Where MkDocs writes a page (directory URLs): docs/a/b.md is site/a/b/index.html."""
    relative = page.relative_to(DOCS).with_suffix("")
    if relative.name == "index":
        return site / relative.parent / "index.html"
    return site / relative / "index.html"


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


# -- the command blocks of the pages (tests/integration/test_doc_commands.py) -------------

SHELL = ("sh", "bash", "console")
# Written on the line above a block that no test can run, with the reason:
# <!-- not run: needs a real Kubernetes API server -->
NOT_RUN = re.compile(r"<!-- not run: (?P<reason>.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    """A shell block of a page: where it is, its text, and why it is not run ("" if it is)."""

    page: Path
    line: int
    label: str
    body: str
    not_run: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[tuple[str, str]]:
        """A console block's commands (after `$ `, continued by a final `\\`), each with the
        output the page shows under it."""
        found: list[tuple[str, str]] = []
        lines = self.body.splitlines()
        while lines:
            line = lines.pop(0)
            if not line.startswith("$ "):
                raise ValueError(f"{self}: output before any `$ ` command: {line!r}")
            command = [line[2:]]
            while command[-1].endswith("\\") and lines:
                command.append(lines.pop(0))
            shown = []
            while lines and not lines[0].startswith("$ "):
                shown.append(lines.pop(0))
            found.append(("\n".join(command), "".join(f"{text}\n" for text in shown)))
        return found


def shell_blocks(page: Path) -> list[Block]:
    """The page's fenced shell blocks (```sh, ```bash, ```console), in order."""
    text = page.read_text()
    found = []
    for fence in FENCE.finditer(text):
        if fence["label"] not in SHELL:
            continue
        before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.search(before)
        body = "\n".join(line[len(fence["indent"]) :] for line in fence["body"].splitlines())
        line = text.count("\n", 0, fence.start()) + 1
        found.append(Block(page, line, fence["label"], body, marker["reason"] if marker else ""))
    return found
