"""A program in a pseudo-terminal, its screen read as a person sees it (pyte emulates the VT).

Drives full-screen programs such as `signin-broker tui`: keys go in through the pty,
what the program draws is replayed on an in-memory 80x24 screen, and `wait_for`
polls that screen (bounded) for the text a person would be waiting to see.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .processes import stop

if TYPE_CHECKING:
    import pyte

SCREEN_SECONDS = 20.0  # what a step shows arrives well within this


class Terminal:
    """A command running in a pty of `columns` x `rows`, with its screen kept current."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        columns: int = 80,
        rows: int = 24,
    ) -> None:
        import pyte  # the [conformance] extra: only what drives a terminal needs it

        self.screen: pyte.Screen = pyte.Screen(columns, rows)
        self._stream = pyte.ByteStream(self.screen)
        self._lock = threading.Lock()
        self._master, replica = os.openpty()
        fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.process = subprocess.Popen(  # noqa: S603 - the caller's own command
            list(command),
            stdin=replica,
            stdout=replica,
            stderr=replica,
            env={"TERM": "xterm-256color", **(env if env is not None else os.environ)},
            start_new_session=True,  # the pty becomes its controlling terminal
            close_fds=True,
        )
        os.close(replica)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # the program exited and the pty closed
                return
            if not chunk:
                return
            with self._lock:
                self._stream.feed(chunk)

    def text(self) -> str:
        """The screen as lines of text, trailing blanks cut."""
        with self._lock:
            return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, *wanted: str, timeout: float = SCREEN_SECONDS) -> str:
        """The screen once it shows every one of `wanted`; AssertionError with it after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            shown = self.text()
            if all(text in shown for text in wanted):
                return shown
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"the screen never showed {wanted!r}; it shows:\n{shown}")
            time.sleep(0.05)

    def press(self, keys: str) -> None:
        """Type keys; escape sequences as they are (the down arrow is ESC [ B)."""
        os.write(self._master, keys.encode())

    def capture(self, path: Path) -> str:
        """Save the screen as text (an artifact a reviewer can read); returns it."""
        shown = self.text()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(shown + "\n")
        return shown

    def close(self, timeout: float = 10.0) -> int:
        """End the program (SIGTERM, then SIGKILL) and the pty; its exit status."""
        stop(self.process, timeout)
        os.close(self._master)
        self._reader.join(timeout)
        return self.process.returncode

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
