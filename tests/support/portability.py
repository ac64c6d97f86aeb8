"""On macOS and Windows, a test module that needs a Linux-only part is skipped, saying which.

Linux is where every part exists (SO_PEERCRED, /proc, sock_diag, systemd, CLOCK_BOOTTIME),
so there a module that fails to import is an error as usual. Elsewhere such a module is
skipped with the import's own message as the reason (a missing fcntl, AF_UNIX, ...),
and a test may say what it needs with `@pytest.mark.skipif(not LINUX, reason=...)`:
.github/workflows/ci.yml runs the unit tests and the daemon's smoke test so on every
system, and the skips list what a port must still provide.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

LINUX = sys.platform.startswith("linux")


class ModuleOnThisSystem(pytest.Module):
    """A test module that is skipped, not an error, when this system lacks what it imports."""

    def _getobj(self) -> Any:
        try:
            return super()._getobj()
        except self.CollectError as error:
            if LINUX:
                raise
            reason = str(error).strip().splitlines()[-1]
            pytest.skip(f"needs a part {sys.platform} lacks: {reason}")


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> pytest.Module | None:
    if LINUX or module_path.name == "conftest.py":
        return None
    return ModuleOnThisSystem.from_parent(parent, path=module_path)
