"""Puts signin_broker.testing and .conformance from the source tree into this wheel.

signin_broker/testing/__init__.py and __main__.py stay the base wheel's (they say what
to install when this one is missing): two wheels never own one file, or pip would
remove it with either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path(__file__).resolve().parents[2] / "src"
PACKAGES = ("signin_broker/testing", "signin_broker/conformance")
BASE_FILES = {"signin_broker/testing/__init__.py", "signin_broker/testing/__main__.py"}


class FromTheSourceTree(BuildHookInterface):
    """Adds every module of the two packages but the base wheel's two."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        for package in PACKAGES:
            for path in sorted((SOURCE / package).glob("*.py")):
                target = path.relative_to(SOURCE).as_posix()
                if target not in BASE_FILES:
                    build_data["force_include"][str(path)] = target
