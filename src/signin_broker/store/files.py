"""Crash-safe file writes: a crash at any moment leaves either the old file or the new one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Write a private (0600) file by write, fsync, rename, fsync of the folder."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)  # the rename itself survives a power cut
    finally:
        os.close(folder)
