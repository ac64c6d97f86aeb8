"""Daemons forked from a process that has loaded the daemon's code already.

Starting `python -m signin_broker.daemon.main` costs about 0.4 s of CPU, nearly all of it
the interpreter's start and the imports (asyncio, grpclib, cryptography, joserfc, httpx2,
Starlette and uvicorn for the page). A test run starts hundreds of daemons on two cores.
So each test process keeps one fork server: a child that imports those modules once, in
the order the daemon does, and then forks a process per daemon. The forked process takes
the daemon's standard streams, folder, environment and argv and runs the entry point as
`python -m` does (runpy, as `__main__`): everything from `main()` on is the daemon's own.

What a fork cannot carry, DaemonProcess execs as before (`can_carry`): another uid, an
interpreter other than this one, and a variable read when the interpreter starts (PYTHON*,
LD_*, the locale, TZ) with a value of its own. /proc shows the fork server's command line
and first environment for a forked daemon, so a test that reads those sets
`SIGNIN_BROKER_TEST_FORKS=0` (the suite's `execd_daemons` fixture): every daemon execs.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import queue
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn

ENTRY = "signin_broker.daemon.main"
# What `python -m signin_broker.daemon.main` loads: its module-level imports, then (after
# "ready", off the event loop) the OAuth stack and the sign-in page, and what libraries
# load at a daemon's first provider request, key, device sign-in or reflection call (seen
# in the suite's daemons: about 60 ms of each one's CPU). A name that is gone is skipped.
AT_IMPORT = ("signin_broker.daemon.app", "signin_broker.daemon.settings", "uvloop")
AFTER_READY = (
    "signin_broker.daemon.oauth_stack",
    "signin_broker.daemon.web.site",
    "httpcore2",
    "anyio._backends._asyncio",
    "truststore",
    "keyring",
    "keyrings.alt.file",
    "platformdirs",
    "segno",
    "grpclib.reflection.service",
    "email.policy",
)
_MESSAGE_BYTES = 1 << 20
SWITCH = "SIGNIN_BROKER_TEST_FORKS"  # "0": every daemon execs


def _read_at_start(name: str) -> bool:
    """A variable the interpreter or a preloaded library reads once, when it starts."""
    if name == "PYTHON_KEYRING_BACKEND":  # keyring reads it at its first use, in main()
        return False
    return name.startswith(("PYTHON", "LD_", "LC_", "MALLOC_", "FAKETIME")) or name in {
        "LANG",
        "TZ",
    }


class ForkedProcess:
    """The part of subprocess.Popen that tests use, for a daemon the fork server started.

    The fork server is its parent and reaps it; the exit status comes back over the
    control socket. Signals go through a pidfd, so one can never reach a reused pid.
    """

    def __init__(self, server: ForkServer, pid: int, pidfd: int, args: list[str], stderr: Any):
        self._server = server
        self._pidfd = pidfd
        self.pid = pid
        self.args = args
        self.stderr = stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.ended.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._server.changed:
            if not self._server.changed.wait_for(lambda: self.poll() is not None, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode  # type: ignore[return-value]  # set by poll() just now

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self) -> None:
        os.close(self._pidfd)


class ForkServer:
    """The fork server of this test process, started with its first forked daemon."""

    _running: ClassVar[ForkServer | None] = None
    _starting: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def shared(cls) -> ForkServer:
        with cls._starting:
            if cls._running is None or cls._running.broken:
                cls._running = cls()
            return cls._running

    def __init__(self) -> None:
        self.environ = dict(os.environ)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, no shell
            [sys.executable, "-m", __name__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            env=self.environ,
        )
        theirs.close()
        self._control = ours
        self._request = threading.Lock()  # one start at a time: its answer is the next "started"
        self._started: queue.Queue[tuple[int, int] | None] = queue.Queue()
        self.changed = threading.Condition()
        self.ended: dict[int, int] = {}
        self.broken = False
        threading.Thread(target=self._read, name="fork server", daemon=True).start()

    def can_carry(self, args: Sequence[str], env: Mapping[str, str]) -> bool:
        """Whether a forked process can be what exec'ing args in env would start."""
        if list(args[:3]) != [sys.executable, "-m", ENTRY]:
            return False
        names = {name for name in (*env, *self.environ) if _read_at_start(name)}
        return all(env.get(name) == self.environ.get(name) for name in names)

    def start(
        self, args: list[str], env: Mapping[str, str], listening: socket.socket | None = None
    ) -> ForkedProcess:
        """Fork a daemon with args[3:] as its flags; its stderr is a pipe, as Popen's.

        `listening`: a socket passed to it as a service manager passes one (fd 3, with
        LISTEN_FDS and LISTEN_PID), for a test that stands in for the socket unit.
        """
        request = json.dumps({"argv": args[3:], "env": dict(env), "cwd": str(Path.cwd())})
        read_end, write_end = os.pipe()
        devnull = os.open(os.devnull, os.O_RDWR)  # stdin and stdout, as Popen's DEVNULL
        fds = [devnull, devnull, write_end]
        if listening is not None:
            fds.append(listening.fileno())
        with self._request:
            socket.send_fds(self._control, [request.encode()], fds)
            os.close(write_end)
            os.close(devnull)
            started = self._started.get()
        if started is None:
            os.close(read_end)
            raise RuntimeError("the fork server ended")
        pid, pidfd = started
        return ForkedProcess(self, pid, pidfd, args, os.fdopen(read_end))

    def _read(self) -> None:
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self._control, _MESSAGE_BYTES, 1)
            except OSError:
                message, fds = b"", []
            if not message:
                self.broken = True
                self._started.put(None)
                return
            answer = json.loads(message)
            if "started" in answer:
                self._started.put((answer["started"], fds[0]))
            else:
                with self.changed:
                    self.ended[answer["ended"]] = answer["returncode"]
                    self.changed.notify_all()


def _preload() -> None:
    _load(AT_IMPORT)
    # main() marks trio absent before the page loads (httpcore2 would take it).
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]
    _load(AFTER_READY)


def _load(names: Sequence[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # uvloop, an extra the daemon runs without; a library gone
            continue


def serve(control: socket.socket) -> None:
    """Fork a daemon for each request, and report each one's end, until the socket closes."""
    _preload()
    gc.freeze()  # the children's collections leave the preloaded objects (and their pages) be
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    children: dict[int, int] = {}  # pidfd: pid
    while True:
        for key, _ in selector.select():
            if key.fileobj is not control:
                pid = children.pop(key.fd)
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                control.send(json.dumps({"ended": pid, "returncode": code}).encode())
                continue
            message, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 4)
            if not message:
                return  # the test process has gone
            pid = os.fork()
            if pid == 0:
                selector.close()
                control.close()
                for pidfd in children:
                    os.close(pidfd)
                _become_daemon(json.loads(message), fds)
            for fd in fds:
                os.close(fd)
            pidfd = os.pidfd_open(pid)
            children[pidfd] = pid
            selector.register(pidfd, selectors.EVENT_READ)
            socket.send_fds(control, [json.dumps({"started": pid}).encode()], [pidfd])


def _become_daemon(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked child: take the daemon's streams, folder and environment, and run it."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if len(fds) > 3:  # a listening socket, passed on as socket activation does
            os.environ.update({"LISTEN_FDS": "1", "LISTEN_PID": str(os.getpid())})
        sys.argv = [ENTRY, *request["argv"]]  # runpy puts the module's file first
        runpy.run_module(ENTRY, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = _exit_status(stop.code)
    except BaseException:  # as the interpreter would: the traceback, then status 1
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()  # the interpreter's own end, which os._exit skips
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def _exit_status(code: object) -> int:
    """SystemExit's code as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def forks_enabled() -> bool:
    """Whether daemons may be forked (Linux 5.3 and later, for pidfds; not when =0)."""
    return hasattr(os, "pidfd_open") and os.environ.get(SWITCH, "1") != "0"


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
