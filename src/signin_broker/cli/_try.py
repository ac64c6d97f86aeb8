"""`signin-broker try [COMMAND...]`: the product with no provider of your own, in a shell.

It starts the stub OpenID provider on loopback (the signin-broker-testing wheel's, run
as a process: the CLI imports none of the test tooling) and a daemon of its own that
knows only that issuer, then runs your shell (or COMMAND) with SIGNIN_BROKER_SOCKET
pointing at that daemon, as `ssh-agent bash` runs a shell with its agent. Leaving the
shell stops both. Their folder is a temporary one: the daemon reads none of your config
files, keeps its key in a file there rather than your keyring, and serves its sign-in
page on a free port, so your own daemon, settings and sign-ins are never touched.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO

from ..json_depth import within_depth
from ..locations import MAX_SOCKET_PATH_BYTES, SOCKET_ENV, SOCKET_NAME
from ._failures import EXIT_FAILED, EXIT_USAGE, complain, tooling_missing
from ._service import daemon_path

ISSUER_ENV = "SIGNIN_BROKER_TRY_ISSUER"
FOLDER_PREFIX = "signin-broker-try-"
STUB_PACKAGE = "signin_broker_testing"
START_SECONDS = 30.0  # the stub's and the daemon's start, each, on a slow machine
STOP_SECONDS = 10.0
NOT_FOUND = 127
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class TryFailed(Exception):
    """The provider or the daemon did not start; the message says why."""


class _Ended(Exception):
    """The command was told to end (SIGTERM, SIGHUP): the command, daemon and stub go too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=int,
        default=0,
        help="the stub provider's port on 127.0.0.1 (default: a free one)",
    )
    parser.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="what to run instead of your shell ($SHELL); `exit` or its end stops the"
        f" daemon and the provider. It finds the daemon through {SOCKET_ENV} and the"
        f" provider's issuer in {ISSUER_ENV}",
    )


def try_it(args: argparse.Namespace) -> int:
    """Start the provider and the daemon, run the command beside them, then stop both."""
    if importlib.util.find_spec(STUB_PACKAGE) is None:
        complain(tooling_missing("the stub provider") + "; the Debian package has it")
        return EXIT_USAGE
    command = (args.argv[1:] if args.argv[:1] == ["--"] else args.argv) or [
        os.environ.get("SHELL") or "/bin/sh"
    ]
    folder = _folder()
    try:
        with _ending_on_signals(), contextlib.ExitStack() as running:
            issuer = running.enter_context(_provider(folder, args.port))
            socket_path = running.enter_context(_daemon(folder, issuer))
            _say_what_runs(issuer, socket_path, interactive=not args.argv)
            return _run(command, {**os.environ, SOCKET_ENV: socket_path, ISSUER_ENV: issuer})
    except TryFailed as failure:
        complain(str(failure))
        return EXIT_FAILED
    except _Ended as ended:
        return 128 + ended.signum
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _folder() -> Path:
    """A new 0700 folder in TMPDIR, or in /tmp where TMPDIR leaves no room for the socket."""
    base = tempfile.gettempdir()
    longest = Path(base) / (FOLDER_PREFIX + "x" * 8) / SOCKET_NAME
    if len(os.fsencode(longest)) > MAX_SOCKET_PATH_BYTES:
        base = "/tmp"  # noqa: S108 - a folder of its own in it, made by mkdtemp
    return Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=base))


@contextlib.contextmanager
def _ending_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP end the command cleanly; Ctrl-C is the command's own to handle.

    The stub and the daemon run in sessions of their own, so only this process can stop
    them: it must not die of a signal before it has.
    """

    def end(signum: int, frame: FrameType | None) -> None:
        for each in ENDING_SIGNALS:  # once: the stopping that follows is not cut short
            signal.signal(each, ignore)
        raise _Ended(signum)

    def ignore(signum: int, frame: FrameType | None) -> None:
        """A handler, not SIG_IGN: the command gets SIGINT's default back at exec."""

    before = {signum: signal.getsignal(signum) for signum in (*ENDING_SIGNALS, signal.SIGINT)}
    for signum in ENDING_SIGNALS:
        signal.signal(signum, end)
    signal.signal(signal.SIGINT, ignore)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def _provider(folder: Path, port: int) -> Iterator[str]:
    """The stub provider on 127.0.0.1, until the block ends; its issuer."""
    log = folder / "provider.log"
    with log.open("wb") as errors:
        stub = subprocess.Popen(  # noqa: S603 - this installation's own interpreter
            [sys.executable, "-m", STUB_PACKAGE, "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            start_new_session=True,
        )
    try:
        first = _first_line(stub.stdout) if stub.stdout else b""
        if not first:
            raise TryFailed(f"the stub provider did not start: {_last_line(log)}")
        yield str(json.loads(within_depth(first))["issuer"])
    finally:
        _stop(stub)


@contextlib.contextmanager
def _daemon(folder: Path, issuer: str) -> Iterator[str]:
    """A signin-brokerd for that issuer alone, in the folder, until the block ends; its socket."""
    socket_path = str(folder / SOCKET_NAME)
    state = folder / "state"
    # None of the person's settings: no SIGNIN_BROKER_* variable, config file or managed file.
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SIGNIN_BROKER_")}
    environ |= {
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_CONFIG_DIRS": str(folder / "config"),
        "XDG_STATE_HOME": str(state),
        "NOTIFY_SOCKET": str(folder / "notify"),  # READY=1 once the socket serves
    }
    argv = [str(daemon_path()), "--issuer", issuer, "--socket", socket_path]
    argv += ["--http", "127.0.0.1:0", "--state-dir", str(state), "--key-store", "file"]
    log = folder / "daemon.log"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notices:
        notices.bind(environ["NOTIFY_SOCKET"])
        with log.open("wb") as errors:
            daemon = subprocess.Popen(  # noqa: S603 - this installation's own daemon
                argv,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                start_new_session=True,
            )
        try:
            _wait_ready(daemon, notices, log)
            yield socket_path
        finally:
            _stop(daemon)


def _first_line(output: IO[bytes]) -> bytes:
    """The line a process prints once it serves, or b"" if it ends or takes too long."""
    ready, _, _ = select.select([output], [], [], START_SECONDS)
    return output.readline() if ready else b""


def _wait_ready(daemon: subprocess.Popen[bytes], notices: socket.socket, log: Path) -> None:
    """Until the daemon says READY=1 (sd_notify), or TryFailed when it stops or takes too long."""
    deadline = time.monotonic() + START_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        if daemon.poll() is not None:
            raise TryFailed(f"the daemon stopped: {_last_line(log)}")
        ready, _, _ = select.select([notices], [], [], min(left, 0.2))
        if ready and "READY=1" in notices.recv(4096).decode(errors="replace").splitlines():
            return
    raise TryFailed(f"the daemon was not ready within {START_SECONDS:g} s: {_last_line(log)}")


def _say_what_runs(issuer: str, socket_path: str, interactive: bool) -> None:
    """What runs and what to type, on stderr (stdout is the command's)."""
    print(
        f"signin-broker try: a stub OpenID provider at {issuer}, which signs in its test"
        " user (Alice Example) without asking, and a daemon of its own for it.",
        file=sys.stderr,
    )
    if interactive:
        print(
            "In this shell, signin-broker and your apps reach that daemon"
            f" ({SOCKET_ENV}={socket_path}); the provider's issuer is in ${ISSUER_ENV}. Try:\n"
            "  signin-broker login\n"
            f'  curl -H "$(signin-broker token --format header)" {issuer}/oauth/v2/userinfo\n'
            "`exit` stops both; your own daemon, settings and sign-ins are not touched.",
            file=sys.stderr,
        )


def _run(command: list[str], environ: dict[str, str]) -> int:
    """The command's exit status (128 + N for a signal, as a shell says; 127 not found)."""
    try:
        child = subprocess.Popen(command, env=environ)  # noqa: S603 - the user's own command
    except FileNotFoundError:
        complain(f"{command[0]}: command not found")
        return NOT_FOUND
    try:
        status = child.wait()
    except _Ended:
        _stop(child)
        raise
    return 128 - status if status < 0 else status


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not stopped in time."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def _last_line(log: Path) -> str:
    """The last line a process wrote to its log (its reason, when it stopped)."""
    lines = log.read_text(errors="replace").strip().splitlines()
    return lines[-1] if lines else "it said nothing"
