"""sha256 pins: what is hashed, what is refused, and that nothing can stall the daemon."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import threading
from pathlib import Path

import pytest

from signin_broker.daemon.callers.identity import Caller
from signin_broker.daemon.callers.pins import (
    Unpinnable,
    file_sha256,
    pinned_program,
    running_sha256,
)
from signin_broker.identities import AppId, AppKind


def script_caller(script: str, *, absolute: bool = True) -> Caller:
    return Caller(
        os.geteuid(), os.getegid(), os.getpid(), sys.executable, 1, script, None, absolute
    )


def test_a_fifo_named_as_the_pinned_script_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "app.py"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def pin() -> None:
        try:
            file_sha256(str(fifo))
        except Unpinnable as error:
            outcome.append(error)

    worker = threading.Thread(target=pin, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "reading a FIFO blocked"
    assert "not a regular file" in str(outcome[0])


def test_a_same_size_edit_with_the_mtime_put_back_changes_the_hash(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("print('good')\n")
    before = script.stat()
    assert file_sha256(str(script)) == hashlib.sha256(b"print('good')\n").hexdigest()
    script.write_text("print('evil')\n")  # the same size
    os.utime(script, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert file_sha256(str(script)) == hashlib.sha256(b"print('evil')\n").hexdigest()


def test_a_native_program_is_hashed_as_the_kernel_runs_it() -> None:
    me = Caller(os.geteuid(), os.getegid(), os.getpid(), "/nonexistent/renamed", 1)
    running = asyncio.run(running_sha256(me))  # /proc/<pid>/exe, not the path
    assert (
        running == hashlib.sha256(Path(os.path.realpath(sys.executable)).read_bytes()).hexdigest()
    )


FLATPAK_APP = AppId(AppKind.FLATPAK, "org.example.App")


@pytest.mark.parametrize(
    ("caller", "reason"),
    [
        (script_caller("/home/me/app.py", absolute=False), "relative path"),
        (script_caller("-m http.server"), "cannot be pinned"),
        (Caller(1000, 1000, 42, "/usr/bin/gjs", 1, sandbox=FLATPAK_APP), "sandbox"),
        (Caller(1000, 1000, 42, "", 1), "could not be identified"),
    ],
)
def test_what_cannot_be_pinned_soundly_is_refused(caller: Caller, reason: str) -> None:
    with pytest.raises(Unpinnable, match=reason):
        pinned_program(caller)
