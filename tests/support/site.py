"""The documentation site as tests read it: the build hook, each page's Markdown as built, the site.

scripts/check builds the site before the tests (`mkdocs build --strict`) and names the
folder in SIGNIN_BROKER_BUILT_SITE; without it the site is built here, once per module
that asks (a few seconds).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
BUILT = "SIGNIN_BROKER_BUILT_SITE"
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
