"""Puts src/signin_broker_testing from the source tree into this wheel.

It is a top-level package of its own: the base wheel (signin_broker) and this one share
no file and no folder, so either installs and uninstalls without touching the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "signin_broker_testing"


class FromTheSourceTree(BuildHookInterface):
    """Adds every file of the package but caches."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        for path in sorted((SOURCE / PACKAGE).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                build_data["force_include"][str(path)] = path.relative_to(SOURCE).as_posix()
