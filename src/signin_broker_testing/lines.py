"""A child process's output, read line by line in a thread and awaited with a bound."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable

LINE_SECONDS = 30.0


class Lines:
    """The lines of a text stream (a Popen's stdout), as they come."""

    def __init__(self, stream: Iterable[str]) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Iterable[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))

    def drain(self) -> list[str]:
        """The lines that came and were not awaited yet."""
        got = []
        while True:
            try:
                got.append(self._lines.get_nowait())
            except queue.Empty:
                self.seen += got
                return got

    def wait_for(self, *texts: str, timeout: float = LINE_SECONDS) -> str:
        """The next line holding one of `texts` (the lines before it are passed over)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if any(text in line for text in texts):
                return line
        raise AssertionError(f"no line with any of {texts!r} in {timeout:g} s; saw {self.seen}")
