"""Ending a child process the way a service manager does: SIGTERM, then SIGKILL."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(process: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM, then SIGKILL if it has not ended within timeout; its exit status."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    return process.returncode
