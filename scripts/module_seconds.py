#!/usr/bin/env python3
"""Writes how long each test module took, from a JUnit report, for the suite's schedule.

    scripts/module_seconds.py [REPORT]    # default: artifacts/tests.xml (scripts/check's)

xdist hands modules out one at a time in the suite's order: a long module handed out
last keeps one worker busy after the others are done. tests/conftest.py orders the
modules longest first from tests/module_seconds.json, which this writes; run it after a
full scripts/check when modules were added or got slower.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module(classname: str) -> str:
    """The module's path of a test's class name (tests.unit.test_x, or .TestClass after it)."""
    parts = classname.split(".")
    while len(parts) > 1 and not (ROOT / ("/".join(parts) + ".py")).exists():
        parts.pop()
    return "/".join(parts) + ".py"


def main() -> None:
    report = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "artifacts" / "tests.xml"
    seconds: Counter[str] = Counter()
    for case in ET.parse(report).iter("testcase"):  # noqa: S314 - pytest wrote it
        seconds[_module(case.get("classname", ""))] += float(case.get("time", "0"))
    ordered = {module: round(took, 1) for module, took in seconds.most_common()}
    target = ROOT / "tests" / "module_seconds.json"
    target.write_text(json.dumps(ordered, indent=1) + "\n")
    print(f"{len(ordered)} modules, {sum(seconds.values()):.0f} s in all: {target}")


if __name__ == "__main__":
    main()
