"""The installed console scripts, found beside the interpreter running the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def signin_broker(
    *args: str,
    timeout: float = 30,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `signin-broker ARGS` to completion, capturing its output; env adds to the environment."""
    return subprocess.run(
        [str(BIN / "signin-broker"), *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
