"""The support bundle of `signin-broker doctor --bundle FILE`: what a helper needs, and no secret.

One JSON file, 0600, for the person to read before sending: the versions, the
settings (secrets are never settings: a setting names the file or keyring entry that
holds one), the daemon's last log lines (which never carry a token, code or secret:
tests/attacks/test_secret_free_logs.py) and the doctor's findings. Nothing is asked
of the daemon that would hand out a token.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections import deque
from importlib import metadata
from pathlib import Path
from typing import Any

from .._version import __version__
from ..client import Status

LOG_LINES = 200
LOG_TAIL_BYTES = 1 << 20
JOURNAL = ["journalctl", "--user", "-u", "signin-broker.service", "-n", str(LOG_LINES), "-o", "cat"]
# The distributions whose versions decide how the broker behaves.
DISTRIBUTIONS = ("grpclib", "protobuf", "keyring", "httpx2", "joserfc", "authlib", "cryptography")


def write_bundle(
    path: Path, findings: list[dict[str, str]], settings: Any, status: Status | None
) -> None:
    """Write the bundle to path (replacing it), readable by the user alone."""
    source, lines = daemon_log(status)
    bundle = {
        "versions": versions(status),
        "settings": settings,
        "log": {"source": source, "lines": lines},
        "findings": findings,
    }
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(bundle, file, indent=2)
        file.write("\n")


def versions(status: Status | None) -> dict[str, str]:
    """The versions of this command, the running daemon, Python, the system, the libraries."""
    found = {
        "signin-broker": __version__,
        "daemon": status.version if status else "not running",
        "python": platform.python_version(),
        "system": platform.platform(),
    }
    for name in DISTRIBUTIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def daemon_log(status: Status | None) -> tuple[str, list[str]]:
    """The daemon's last log lines, and where they came from (or why there are none).

    The daemon logs to its stderr: a file when it was started with `2>FILE`, the journal
    under systemd, a pipe (not readable here) when another program runs it.
    """
    if status is None:
        return "none: the daemon is not running", []
    stderr = Path("/proc") / str(status.pid) / "fd" / "2"
    try:
        target = stderr.resolve(strict=True)
        if target.is_file():
            return str(target), _tail(target)
    except OSError:
        pass
    if status.started_by != "manual":
        return "journalctl --user -u signin-broker.service", _journal()
    return f"none: the daemon's stderr ({_described(stderr)}) is not a file", []


def _tail(path: Path) -> list[str]:
    with path.open("rb") as file:
        file.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
        text = file.read(LOG_TAIL_BYTES).decode(errors="replace")
    return list(deque(text.splitlines(), maxlen=LOG_LINES))


def _journal() -> list[str]:
    try:
        read = subprocess.run(  # noqa: S603 - a fixed command, no shell
            JOURNAL, capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"(journalctl could not be run: {error})"]
    return read.stdout.splitlines()


def _described(stderr: Path) -> str:
    try:
        return str(stderr.readlink())
    except OSError:
        return "unknown"
