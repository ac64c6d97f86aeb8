"""`signin-brokerd`: the daemon's entry point (foreground; systemd or launchd run it).

Exit status: 0 after a clean stop, 1 when it cannot start (another instance, unsafe
socket or state folder) or a stop hung (with every thread's stack on stderr), 2 when a
setting is wrong.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

# grpc-core writes plain-text lines to stderr; keep stderr JSON unless asked otherwise.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from ..store.files import UnsafeStorage, private_folder
from . import logs
from .app import serve
from .host import systemd
from .host.instance import Instance, InstanceError, adopt, claim, listen_loopback
from .settings import SettingsError, load, unknown_variables
from .stopping import cancel_limit as cancel_stop_limit

log = logging.getLogger("signin_broker.daemon")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the daemon until it is told to stop; returns the exit status."""
    _keep_trio_out()
    try:
        settings = load(argv)
    except SettingsError as error:
        print(f"signin-brokerd: {error}", file=sys.stderr)
        return 2
    os.umask(0o077)  # everything the daemon creates is the user's alone
    logs.configure(settings.log_level)
    for variable, nearest in unknown_variables(os.environ):
        log.warning(
            "ignored an environment variable that is no setting",
            extra={"variable": variable, "nearest_setting": nearest},
        )
    _raise_open_file_limit()
    try:
        instance = _take_socket(settings.socket)
    except InstanceError as error:
        return _cannot_start(str(error))
    try:  # where another uid can add files, it can plant symlinks or older copies
        private_folder(settings.state_dir, with_ancestors=True)
        private_folder(settings.state_dir / "accounts")
    except UnsafeStorage as error:
        instance.release()
        return _cannot_start(str(error))
    try:
        web_socket = listen_loopback(settings.http)
    except OSError as error:
        instance.release()
        return _cannot_start(f"cannot listen on {settings.http}: {error.strerror}")
    try:
        _run(serve(settings, instance, web_socket))
        cancel_stop_limit()  # the stop finished in time
    finally:
        instance.release()
    _exit_now(0)


def _take_socket(configured: Path) -> Instance:
    """The socket systemd passed (socket activation), else one bound here."""
    fds = systemd.listen_fds()
    if not fds:
        return claim(configured)
    if len(fds) != 1:
        raise InstanceError(f"expected one socket from the service manager, got {len(fds)}")
    instance = adopt(fds[0])
    if instance.socket_path != configured:
        log.info(
            "serving the socket the service manager passed",
            extra={"socket": str(instance.socket_path), "configured": str(configured)},
        )
    return instance


def _cannot_start(reason: str) -> int:
    log.error(reason)
    print(f"signin-brokerd: {reason}", file=sys.stderr)
    return 1


def _exit_now(status: int) -> NoReturn:
    """End the process once everything is written and released.

    Nothing is left for the interpreter's teardown to do, and skipping it means no
    native library's exit handler can hold a stopping daemon (CI saw a daemon that had
    logged "stopped" still alive 15 seconds later).
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _run(coroutine: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coroutine)  # type: ignore[arg-type]
    else:
        uvloop.run(coroutine)  # type: ignore[arg-type]


def _keep_trio_out() -> None:
    """The daemon runs on asyncio (or uvloop), never on trio: an installed trio stays unloaded.

    httpcore2 imports trio whenever it is installed (a test tool, selenium, brings it), and
    the daemon would hold it for nothing: 52 modules, 3.5 MB resident. Marking it absent
    makes that import fail as it does where trio is not installed.
    """
    sys.modules.setdefault("trio", None)  # type: ignore[arg-type]


def _raise_open_file_limit() -> None:
    """Each connection costs three descriptors; a thousand watchers need more than 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


if __name__ == "__main__":
    sys.exit(main())
