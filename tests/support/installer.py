"""Fresh venvs with this tree's wheels in them, as a user installs them.

uv where scripts/bootstrap fetched it (into .cache/uv) or the machine has it: seconds
where pip takes a minute to resolve and unpack the dependencies. Both install from the
wheel's own metadata and record every file they write, which is what the tests check
(contents, entry points, sizes, one wheel's removal leaving the other's files).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
UV = next(
    (str(p) for p in (REPO / ".cache" / "uv" / "bin" / "uv",) if p.is_file()),
    shutil.which("uv"),
)


def new_venv(folder: Path) -> Path:
    """A new venv with pip in it (tests list what is installed with it); its python."""
    if UV:
        command = [UV, "venv", "--quiet", "--seed", "--python", sys._base_executable, str(folder)]
    else:
        command = [sys.executable, "-m", "venv", str(folder)]
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return folder / "bin" / "python"


def pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pip ARGS` (install, uninstall) in the venv of `python`, answered whatever it says."""
    if UV:
        args = tuple(a for a in args if a != "--yes")  # uv never asks
        command = [UV, "pip", args[0], "--quiet", "--python", str(python), *args[1:]]
    else:
        command = [str(python), "-m", "pip", args[0], "--quiet", *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
