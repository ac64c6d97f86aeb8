"""Acting as a second OS user: CI creates one (SIGNIN_BROKER_TEST_OTHER_USER); needs root."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from support.real import unavailable

AS_USER = Path(__file__).parent / "as_user.py"


def other_user() -> str:
    """A second OS user: SIGNIN_BROKER_TEST_OTHER_USER (CI creates it), else `nobody`."""
    if os.geteuid() != 0:
        unavailable("acting as a second OS user needs root (CI runs as root)")
    name = os.environ.get("SIGNIN_BROKER_TEST_OTHER_USER", "nobody")
    try:
        pwd.getpwnam(name)
    except KeyError:
        unavailable(f"no OS user {name!r} to act as the second user")
    return name


def run_as(user: str, target: Path | str, action: str) -> dict:
    result = subprocess.run(
        [sys.executable, str(AS_USER), user, str(target), action],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(result.stdout)
