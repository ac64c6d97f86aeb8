"""Each module names its one concept in one sentence; functions and classes stay readable.

Length is no measure of a module: it is as long as its concept. A function is held to a
screen and a class to twenty public methods: beyond them, a use case or a concept hides
inside that wants a name of its own.
"""

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


MAX_FUNCTION_LINES = 60
MAX_PUBLIC_METHODS = 20


def long_functions(tree: ast.AST) -> list[str]:
    """Functions and methods (nested ones too) over MAX_FUNCTION_LINES lines, decorators aside."""
    return [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def large_classes(tree: ast.AST) -> list[str]:
    """Classes with more than MAX_PUBLIC_METHODS public methods (properties count)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            public = [
                member.name
                for member in node.body
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
                and not member.name.startswith("_")
            ]
            if len(public) > MAX_PUBLIC_METHODS:
                found.append(f"{node.name} ({len(public)} public methods)")
    return found


def test_no_function_runs_over_sixty_lines_nor_a_class_over_twenty_public_methods() -> None:
    """A function you can read in one screen, an object you can hold in your head."""
    offenders = {
        str(path.relative_to(SOURCES)): found
        for path in MODULES
        if (found := [*long_functions(tree := ast.parse(path.read_text())), *large_classes(tree)])
    }
    assert offenders == {}


def test_the_shape_checks_see_a_long_function_and_a_large_class() -> None:
    lines = [f"    x = {n}\n" for n in range(MAX_FUNCTION_LINES)]
    assert long_functions(ast.parse("def f():\n" + "".join(lines))) == ["f (61 lines)"]
    assert long_functions(ast.parse("def f():\n" + "".join(lines[1:]))) == []
    methods = "".join(f"    def m{n}(self): ...\n" for n in range(MAX_PUBLIC_METHODS + 1))
    assert large_classes(ast.parse(f"class C:\n{methods}    def _m(self): ...\n")) == [
        "C (21 public methods)"
    ]
    assert large_classes(ast.parse(f"class C:\n{methods.split(chr(10), 1)[1]}")) == []
