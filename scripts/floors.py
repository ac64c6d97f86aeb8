"""The lowest versions pyproject.toml allows, as pip constraints; or whether they are installed.

    python scripts/floors.py            # name==floor for every run-time dependency
    python scripts/floors.py --check    # exit 1 unless each installed version is its floor

scripts/lowest installs the package against these and runs the tests, so that a floor
in pyproject.toml is one the code works with, not a guess.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def floors() -> dict[str, tuple[str, Requirement]]:
    """Each run-time dependency's floor, and its requirement as written, by name."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    found = {}
    for text in project["dependencies"]:
        requirement = Requirement(text)
        lowest = [s.version for s in requirement.specifier if s.operator in (">=", "==", "~=")]
        if len(lowest) != 1:
            sys.exit(f"{text!r} states no single floor (>=, == or ~=)")
        found[requirement.name] = (lowest[0], requirement)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with what is installed")
    args = parser.parse_args()
    wrong = []
    for name, (floor, requirement) in floors().items():
        marker = requirement.marker
        if not args.check:
            print(f"{name}=={floor}" + (f"; {marker}" if marker else ""))
            continue
        if marker is not None and not marker.evaluate():
            continue
        installed = importlib.metadata.version(name)
        if Version(installed) != Version(floor):
            wrong.append(f"{name} {installed} (floor {floor})")
    if wrong:
        print("not at their floors: " + ", ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
