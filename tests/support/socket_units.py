"""Stand-ins for the user manager's socket unit: the socket kept, a daemon started at a caller.

`Activator` runs systemd-socket-activate, and again each time the daemon it became exits:
the real tool, with a moment between two runs where nothing listens (it binds the socket
anew). `SocketUnit` holds the listening socket itself across the daemons' lives, as
systemd's socket unit does, and forks a daemon (forks.py) when a caller waits and none
runs: a start then costs tens of milliseconds, for a test of many idle cycles.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from signin_broker_testing.daemon import DaemonProcess
from support.real import unavailable

POLL_SECONDS = 0.01


class Activator:
    """systemd-socket-activate in a loop, each run exec'ing the daemon at its first caller."""

    def __init__(self, socket_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        if shutil.which("systemd-socket-activate") is None:
            unavailable("systemd-socket-activate is needed (Debian package systemd)")
        template = DaemonProcess(socket_path, *args, env=env)  # its flags and folders
        passed = sorted(set(template.env) - set(os.environ) | {"PATH"})
        self.command = [
            "systemd-socket-activate", "--listen", str(socket_path),
            *(f"--setenv={name}" for name in passed), *template.args,
        ]  # fmt: skip
        self.env = template.env
        self.socket_path = socket_path
        self.lines: list[str] = []  # every run's stderr: the tool's lines and the daemon's
        self.runs = 0  # the runs that listened
        self._current: subprocess.Popen[str] | None = None
        self._stopped = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._thread.start()
        self.wait_listening(1)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopped.set()
        process = self._current
        if process is not None and process.poll() is None:
            process.terminate()
        self._thread.join(30)

    def starts(self) -> int:
        """How many daemons this unit started (each says "ready" once)."""
        return sum('"msg":"ready"' in line for line in list(self.lines))

    def count(self, text: str) -> int:
        """How many lines so far hold `text`."""
        return sum(text in line for line in list(self.lines))

    def wait_listening(self, runs: int, timeout: float = 30.0) -> None:
        """Until the `runs`-th run of the tool listens on the socket."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.runs >= runs, timeout):
                raise AssertionError(f"run {runs} never listened; saw:\n" + "\n".join(self.lines))

    def wait_lines(self, text: str, count: int, timeout: float = 30.0) -> None:
        """Until `count` lines hold `text` (a daemon's log message, the tool's line)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.count(text) >= count, timeout):
                raise AssertionError(f"{count} x {text!r} never came:\n" + "\n".join(self.lines))

    def _loop(self) -> None:
        while not self._stopped.is_set():
            process = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            self._current = process
            assert process.stderr is not None
            for line in process.stderr:
                with self._changed:
                    self.lines.append(line.rstrip("\n"))
                    if line.startswith("Listening on"):
                        self.runs += 1
                    self._changed.notify_all()
            process.wait()


class SocketUnit:
    """Holds the listening socket and forks a daemon whenever a caller waits and none runs."""

    def __init__(self, socket_path: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.socket_path = socket_path
        self._args, self._env = args, env
        self.daemons: list[DaemonProcess] = []
        # Held while a daemon is forked and listed: the caller it serves may have its
        # answer before the list has it, and must not take the one before for it.
        self._starting = threading.Lock()
        self._listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self.socket_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        previous = os.umask(0o177)
        try:
            self._listening.bind(str(self.socket_path))
        finally:
            os.umask(previous)
        self._listening.listen(1024)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopped.set()
        self._thread.join(30)
        for daemon in self.daemons:
            if daemon.alive:
                daemon.stop()
        self._listening.close()

    def running(self) -> DaemonProcess | None:
        """The daemon that runs now, if one does."""
        daemon = self.daemons[-1] if self.daemons else None
        return daemon if daemon is not None and daemon.alive else None

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Until the daemon started last exits; its exit status."""
        deadline = time.monotonic() + timeout
        while not self.daemons and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        with self._starting:
            last = self.daemons[-1]
        return last.wait_exit(max(deadline - time.monotonic(), 0.1))

    def _loop(self) -> None:
        while not self._stopped.is_set():
            if self.running() is not None:
                time.sleep(POLL_SECONDS)
                continue
            waiting, _, _ = select.select([self._listening], [], [], POLL_SECONDS)
            if waiting and not self._stopped.is_set():
                daemon = DaemonProcess(self.socket_path, *self._args, env=self._env)
                with self._starting:
                    daemon.start(wait=False, listening=self._listening)
                    self.daemons.append(daemon)
