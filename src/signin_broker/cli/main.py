"""`signin-broker`'s entry points: the one-shot `token` first (_token.py), then any command.

Exit status: 0 ok, 1 the daemon refused or failed, 2 usage, 3 the daemon is not
running, 4 not signed in. Data goes to stdout (`--json` for scripts); messages go to
stderr. The one-shot is read (_flags.py) and run without argparse; any other line loads the whole
CLI (table.py) to be read, and only the command it names.
"""

from __future__ import annotations

import os
import sys

from ._failures import EXIT_FAILED
from ._flags import read_token_line
from ._token import token


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    given = sys.argv[1:] if argv is None else argv
    one_shot = None if "_ARGCOMPLETE" in os.environ else read_token_line(given)
    if one_shot is not None:  # `signin-broker token` as scripts run it
        return token(one_shot)
    from .table import run_command  # argparse and the command table: the one-shot did without

    return run_command(given)


def run() -> None:
    """The console script: main(), then leave at once.

    Skipping the interpreter's teardown saves about 35 ms per command, most of it
    grpcio shutting down; the command has nothing left to clean up but its output.
    """
    _finish(None)


def git_credential_helper() -> None:
    """`git-credential-signin-broker get|store|erase`: the program name git looks for."""
    _finish(["git-credential", *sys.argv[1:]])


def docker_credential_helper() -> None:
    """`docker-credential-signin-broker get|store|erase|list`: the name docker looks for."""
    _finish(["docker-credential", *sys.argv[1:]])


def native_host() -> None:
    """`signin-broker-native-host`: the program the browsers' manifests name (their `path`)."""
    _finish(["native-host", *sys.argv[1:]])


def _finish(argv: list[str] | None) -> None:
    """Run the command, flush its output and leave; a reader that went away ends it quietly.

    `signin-broker audit --json | head -1` closes the pipe while the command writes (or
    flushes): that is the reader's choice, not a failure worth a traceback.
    """
    try:
        code = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = EXIT_FAILED
    os._exit(code)
