"""No module of the package is over 450 lines (generated code aside): one concept a room."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "src" / "signin_broker"
MAX_LINES = 450


def test_no_module_is_over_450_lines() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for path in PACKAGE.rglob("*.py")
        if "_pb2" not in path.name
    }
    assert {name: size for name, size in sizes.items() if size > MAX_LINES} == {}
