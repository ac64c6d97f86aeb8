"""Runs the real `signin-brokerd` as a subprocess and reads its JSON log lines.

Used by the test suite and by `signin-broker conformance`; an expectation that is not
met (no "ready", no such log record) raises AssertionError, as a test would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar

from .forks import ForkedProcess, ForkServer, forks_enabled

# A bound, not a measure: on two cores busy with a whole test run and the grid beside
# it, a daemon has been seen to take over 15 s to say it is ready.
READY_TIMEOUT_SECONDS = 60.0


def short_temp_dir() -> Path:
    """A fresh 0700 folder with a short path (Unix socket paths are limited to ~100 bytes)."""
    return Path(tempfile.mkdtemp(prefix="sb-", dir="/tmp"))


STOP_HUNG = "Timeout (0:00:"  # faulthandler's first line when the daemon's stop limit fires


class DaemonProcess:
    """A signin-brokerd subprocess: start, wait until ready, read logs, stop.

    Every started daemon is remembered until it exits, so a test that fails before
    its own stop() still leaves no daemon behind (see conftest's cleanup fixture).
    `every` keeps them all for good, so a whole test run can check their log lines
    (no secret in any of them). Daemons log at debug unless told otherwise, so that
    check sees everything a daemon can write.
    """

    started: ClassVar[list[DaemonProcess]] = []
    every: ClassVar[list[DaemonProcess]] = []

    @classmethod
    def stop_started_since(cls, count: int) -> None:
        """Stop the daemons started after the first `count` (those of one test)."""
        while len(cls.started) > count:
            daemon = cls.started.pop()
            if daemon.alive:
                daemon.stop()

    def __init__(
        self,
        socket_path: Path,
        *args: str,
        env: dict[str, str] | None = None,
        user: str | None = None,
        open_files: int | None = None,
    ) -> None:
        """`open_files`: a limit on its descriptors, soft and hard (prlimit(1): it then execs)."""
        self.socket_path = socket_path
        limited = ["prlimit", f"--nofile={open_files}:{open_files}", "--"] if open_files else []
        self.args = [
            *limited,
            sys.executable,
            "-m",
            "signin_broker.daemon.main",
            "--socket",
            str(socket_path),
            "--http",
            "127.0.0.1:0",
            *args,
        ]
        # Never the developer's own config, state, runtime folder or keyring: all live
        # beside the socket.
        # The keyring is keyrings.alt's file backend there, unless a test picks another.
        folder = socket_path.parent
        self.env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(folder / "config"),
            "XDG_CONFIG_DIRS": str(folder / "system-config"),  # no managed defaults but a test's
            "XDG_STATE_HOME": str(folder / "state"),
            "XDG_DATA_HOME": str(folder / "data"),
            "XDG_RUNTIME_DIR": str(folder),  # the runtime journal's folder: signin-broker/
            "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
            "SIGNIN_BROKER_LOG_LEVEL": "debug",
            **(env or {}),
        }
        self.user = user
        self.lines: list[str] = []  # stderr's lines, only ever appended to
        self._records: list[dict[str, Any]] = []  # of lines[:_parsed_lines]
        self._parsed_lines = 0
        self._parsing = threading.Lock()
        self.process: subprocess.Popen[str] | ForkedProcess | None = None

    def start(self, wait: bool = True, listening: socket.socket | None = None) -> DaemonProcess:
        """Start the process; with wait, return once it logged "ready".

        It is forked from this test process's fork server (forks.py) where a fork can be
        what exec'ing `python -m signin_broker.daemon.main` would start. `listening`: a
        socket it is passed as by socket activation (forked daemons only).
        """
        if listening is not None and not self._forkable():
            raise RuntimeError("a listening socket is passed to forked daemons only")
        if self._forkable():
            self.process = ForkServer.shared().start(self.args, self.env, listening)
        else:
            self.process = subprocess.Popen(  # noqa: S603 - our own daemon, no shell
                self.args,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                user=self.user,
            )
        DaemonProcess.started.append(self)
        DaemonProcess.every.append(self)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if wait:
            self.wait_ready()
        return self

    def _forkable(self) -> bool:
        if self.user is not None or not forks_enabled():
            return False
        return ForkServer.shared().can_carry(self.args, self.env)

    def _running(self) -> subprocess.Popen[str] | ForkedProcess:
        if self.process is None:
            raise RuntimeError("the daemon was not started")
        return self.process

    def _read_stderr(self) -> None:
        for line in self._running().stderr or ():
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self) -> None:
        """Block until the daemon logged "ready" and its sign-in page is up."""
        self.wait_for_log("sign-in page ready")

    def wait_for_log(self, message: str, timeout: float = READY_TIMEOUT_SECONDS) -> dict[str, Any]:
        """Block until a log record with this msg appears; return it."""
        deadline = time.monotonic() + timeout
        while True:
            for record in self._lenient_records():
                if record.get("msg") == message:
                    return record
            if self._running().poll() is not None or time.monotonic() > deadline:
                time.sleep(0.1)  # let the reader catch the last lines
                raise AssertionError(
                    f"no {message!r} from the daemon (exit {self._running().poll()}):\n"
                    + self.output()
                )
            time.sleep(0.02)

    @property
    def web_url(self) -> str:
        """The daemon's loopback page, e.g. http://127.0.0.1:41234 (no trailing slash)."""
        return str(self.wait_for_log("ready")["web"]).rstrip("/")

    def logs_with(self, **fields: object) -> list[dict[str, Any]]:
        """Log records that carry all of these field values."""
        return [r for r in self._lenient_records() if all(r.get(k) == v for k, v in fields.items())]

    def expect_log(self, timeout: float = 5.0, **fields: object) -> list[dict[str, Any]]:
        """Wait for a record with these field values (stderr is read a moment late)."""
        deadline = time.monotonic() + timeout
        while not (found := self.logs_with(**fields)):
            if time.monotonic() > deadline:
                raise AssertionError(f"no log record with {fields}:\n{self.output()}")
            time.sleep(0.02)
        return found

    def _lenient_records(self) -> list[dict[str, Any]]:
        """The JSON lines so far: each parsed once, as waits poll them every 20 ms."""
        with self._parsing:
            for line in self.lines[self._parsed_lines : len(self.lines)]:
                self._parsed_lines += 1
                try:
                    self._records.append(json.loads(line))
                except ValueError:
                    continue  # a crash's traceback: output() shows it
            return list(self._records)

    def wait_exit(self, timeout: float = 15.0) -> int:
        """Wait for the process to end by itself; returns its exit status."""
        code = self._running().wait(timeout)
        self._reader.join(timeout)  # every line the process wrote has been read
        return code

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send signum and wait for the exit status."""
        process = self._running()
        if process.poll() is None:
            process.send_signal(signum)
        code = self.wait_exit(timeout)
        if code == 1 and STOP_HUNG in self.output():  # the daemon's own stop limit fired
            warnings.warn(f"the daemon's stop hung:\n{self.output()}", stacklevel=2)
        return code

    def kill(self) -> None:
        """SIGKILL: the daemon gets no chance to clean up."""
        process = self._running()
        process.kill()
        process.wait(15)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        return self._running().pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def records(self) -> list[dict[str, Any]]:
        """Every log line, parsed: each must be one JSON object."""
        return [json.loads(line) for line in self.lines if line.strip()]

    def __enter__(self) -> DaemonProcess:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        if self.alive:
            self.stop()
