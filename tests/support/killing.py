"""Real daemons killed at one step of their file writes, started a hundred times in seconds.

DaemonForks is a Python process with the daemon's modules loaded (the gRPC server, the
OAuth stack, keyring) that forks one daemon per request and runs its entry point,
`signin_broker.daemon.main`, as `signin-brokerd` would: a real process with its own
pid, socket and state, started in a tenth of the time a new interpreter takes to
import it all. Before it runs, the fork may wrap the file system calls a write is made
of (an open for writing, fsync, replace, rename, unlink) under the folders named: the
k-th such call kills the process just before it is made, or just after it returns (an
open for writing has then emptied the file). Which k, and before or after, is the
test's to vary; nothing of this is in the daemon itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from signin_broker_testing.daemon import DaemonProcess

FORKS = r"""
import builtins, importlib, io, json, os, signal, sys

for module in sys.argv[1:]:
    importlib.import_module(module)  # what a daemon loads, once for every fork
try:
    import uvloop  # the daemon's loop where installed
except ImportError:
    pass
from signin_broker.daemon.main import main

WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC

def writes(args, kwargs):  # whether an open() or os.open() call opens for writing
    how = args[1] if len(args) > 1 else kwargs.get("mode", kwargs.get("flags", "r"))
    return bool(how & WRITING) if isinstance(how, int) else any(c in how for c in "wax+")

def kill_at(under, when, at):
    steps = [0]
    def counted(real, by_descriptor=False, opens=False):
        def call(*args, **kwargs):
            first = args[0] if args else kwargs.get("file", kwargs.get("path"))
            if not by_descriptor and not (
                isinstance(first, (str, bytes, os.PathLike))
                and os.fsdecode(first).startswith(under)
                and (not opens or writes(args, kwargs))
            ):
                return real(*args, **kwargs)
            steps[0] += 1
            if steps[0] == at and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            result = real(*args, **kwargs)
            if steps[0] == at and when == "after":
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        return call
    builtins.open = io.open = counted(builtins.open, opens=True)
    os.open = counted(os.open, opens=True)
    for name in ("replace", "rename", "unlink"):
        setattr(os, name, counted(getattr(os, name)))
    os.fsync = counted(os.fsync, by_descriptor=True)

for line in sys.stdin:
    asked = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_RDWR), 0)
        os.dup2(0, 1)  # the forks' requests and answers are not the daemon's
        if asked["at"]:
            kill_at(tuple(f + os.sep for f in asked["under"]), asked["when"], asked["at"])
        os._exit(main(asked["args"]))
    print(f"pid {pid}", flush=True)
    _, status = os.waitpid(pid, 0)
    print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)
"""

# What the daemon imports before "ready" and in its worker thread after it.
PRELOADED = [
    "signin_broker.daemon.app",
    "signin_broker.daemon.oauth_stack",
    "signin_broker.store.keyring_keys",
    "keyring",
    "keyrings.alt.file",
]


class DaemonForks:
    """Forks real daemons on one socket and state, each killed at a chosen step of its writes.

    Its log lines (every fork's, in turn) are in `lines`, and searched for secrets with
    every DaemonProcess's at the end of the run.
    """

    def __init__(self, socket_path: Path, *args: str) -> None:
        like = DaemonProcess(socket_path, *args)  # the same flags and environment
        self.args = like.args  # named so for the secret scan of every daemon's log lines
        self.socket_path = socket_path
        self.lines: list[str] = []
        self._process = subprocess.Popen(
            [sys.executable, "-c", FORKS, *PRELOADED],
            env=like.env, text=True, bufsize=1,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        DaemonProcess.every.append(self)  # type: ignore[arg-type]

    def start(self, under: Sequence[Path] = (), when: str = "after", at: int = 0) -> int:
        """Fork a daemon that kills itself at the `at`-th write step under `under` (0: never)."""
        flags = self.args[3:]  # after `python -m signin_broker.daemon.main`
        asked = {"args": flags, "under": [str(f) for f in under], "when": when, "at": at}
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps(asked) + "\n")
        said = self._process.stdout.readline()
        assert said.startswith("pid "), f"the forks ended: {said!r}\n" + "\n".join(self.lines)
        return int(said.split()[1])

    def ended(self, pid: int, kill: bool = False) -> int:
        """Wait for the fork to end (SIGKILL it first when `kill`); its exit status."""
        if kill:
            os.kill(pid, signal.SIGKILL)
        assert self._process.stdout is not None
        said = self._process.stdout.readline()
        assert said.startswith("exit "), f"the forks ended: {said!r}"
        return int(said.split()[1])

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(30)
        self._reader.join(10)

    def _read_stderr(self) -> None:
        for line in self._process.stderr or ():
            self.lines.append(line.rstrip("\n"))
