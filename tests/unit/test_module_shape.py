"""Each module says in its first sentence the one concept it holds (length is no measure)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCES = Path(__file__).parents[2] / "src"
MODULES = sorted(
    path
    for package in ("signin_broker", "signin_broker_testing")
    for path in (SOURCES / package).rglob("*.py")
    if "_pb2" not in path.name  # generated from the .proto
)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(SOURCES)))
def test_a_module_opens_with_the_one_sentence_that_names_its_concept(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    summary = " ".join(docstring.split("\n\n")[0].split())
    assert summary.endswith((".", ")")), f"{path.name}: no one-sentence summary: {summary!r}"
    assert summary.count(". ") == 0, f"{path.name}: one sentence, not more: {summary!r}"
