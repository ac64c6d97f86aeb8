"""`signin-broker exec -- CMD ARGS...`: run a command with a fresh token in its environment.

The token goes into an environment variable, never into argv (which `ps` shows to every
user). The process becomes CMD (exec), so signals reach it directly and its exit status
is the command's own; a command that cannot be found is 127, as in a shell.
"""

from __future__ import annotations

import argparse
import os

from ._failures import EXIT_USAGE, Refused, complain
from ._flags import DEFAULT_ENV_NAME, shell_name
from ._json_client import fetch
from ._options import add_request_options

TOKEN_TYPE_ENV = "SIGNIN_BROKER_TOKEN_TYPE"  # noqa: S105 - a variable's name
NOT_FOUND = 127
NOT_RUNNABLE = 126


def add_options(parser: argparse.ArgumentParser) -> None:
    add_request_options(parser, min_ttl=60)  # the command gets a minute's use at least
    parser.add_argument(
        "--env",
        default=DEFAULT_ENV_NAME,
        metavar="NAME",
        help=f"the variable that carries the token (default {DEFAULT_ENV_NAME}); its type goes"
        f" into {TOKEN_TYPE_ENV}: Bearer, or DPoP for a token bound to the daemon's key, which"
        " the command must send with a proof per request: `signin-broker token --format dpop"
        " --method M --url U` prints both headers, and the SDK's HTTP auths add them",
    )
    parser.add_argument(
        "argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run, after --"
    )


def exec_command(args: argparse.Namespace) -> int:
    """Fetch the token, then become the command with it in its environment."""
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        complain("exec needs a command: signin-broker exec -- CMD ARGS...")
        return EXIT_USAGE
    if not shell_name(args.env):
        complain(f"--env must be a variable name, not {args.env!r}")
        return EXIT_USAGE
    try:
        issued = fetch(args)
    except Refused as refusal:
        return refusal.status
    # A DPoP-bound token (RFC 9449) is no use alone: the child asks for each request's
    # proof itself (`signin-broker token --format dpop`, the SDK, its HTTP auths).
    environment = {
        **os.environ,
        args.env: str(issued["access_token"]),
        TOKEN_TYPE_ENV: str(issued.get("token_type", "Bearer")),
    }
    try:
        os.execvpe(command[0], command, environment)  # noqa: S606 - the user's own command
    except FileNotFoundError:
        complain(f"{command[0]}: command not found")
        return NOT_FOUND
    except OSError as error:
        complain(f"{command[0]}: {error.strerror}")
        return NOT_RUNNABLE
