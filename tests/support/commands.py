"""The installed console scripts, found beside the interpreter running the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def signin_broker(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run `signin-broker ARGS` to completion, capturing its output."""
    return subprocess.run(
        [str(BIN / "signin-broker"), *args], capture_output=True, text=True, timeout=timeout
    )
