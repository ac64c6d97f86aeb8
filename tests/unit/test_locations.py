"""The socket path without platformdirs (20 ms of a one-shot) where it is plain, and the same path.

locations.default_socket_path takes $XDG_RUNTIME_DIR itself when a check stricter than
platformdirs' own says platformdirs would take it too; otherwise it asks platformdirs.
Either way, a client and the daemon must find the socket where platformdirs puts it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ASK_LOCATIONS = (
    "import sys; from signin_broker.locations import default_socket_path;"
    " print(default_socket_path()); print('platformdirs' in sys.modules)"
)
ASK_PLATFORMDIRS = (
    "import os, warnings, platformdirs; warnings.simplefilter('ignore');"
    " print(os.path.join(platformdirs.user_runtime_dir('signin-broker'), 'broker.sock'))"
)


def run(code: str, runtime: str) -> list[str]:
    environment = {k: v for k, v in os.environ.items() if k != "SIGNIN_BROKER_SOCKET"}
    environment["XDG_RUNTIME_DIR"] = runtime
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True,
        timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.split("\n")


def folder(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)
    return path


def runtime_dirs(base: Path) -> dict[str, tuple[str, bool]]:
    """Each XDG_RUNTIME_DIR, and whether platformdirs is needed to judge it."""
    private = folder(base / "private", 0o700)
    (base / "link").symlink_to(private)
    (base / "file").write_text("")
    sticky = folder(base / "sticky", 0o1777)
    shared = folder(base / "shared", 0o777)
    others = folder(base / "others", 0o700)
    if os.geteuid() == 0:
        os.chown(others, 4242, 4242)
    else:  # a user cannot give a folder away: take one that is root's
        others = Path("/")
    return {
        "private": (str(private), False),
        "below a sticky folder": (str(folder(sticky / "run", 0o700)), False),
        "group-readable": (str(folder(base / "open", 0o750)), True),
        "a symlink": (str(base / "link"), True),
        "below a folder others can write": (str(folder(shared / "run", 0o700)), True),
        "a file": (str(base / "file"), True),
        "another user's": (str(others), True),
        "not normalised": (f"{private}/", True),
        "two leading slashes": (f"/{private}", False),  # POSIX keeps them: the walk must end
        "relative": ("private", True),
        "unset": ("", True),
    }


def test_the_socket_path_is_platformdirs_own_with_or_without_it(tmp_path: Path) -> None:
    base = folder(tmp_path / "base", 0o755)
    for case, (runtime, needs_platformdirs) in runtime_dirs(base).items():
        path, imported, _ = run(ASK_LOCATIONS, runtime)
        assert path == run(ASK_PLATFORMDIRS, runtime)[0], case
        assert imported == str(needs_platformdirs), case
