"""`signin-broker`: ask the daemon for tokens, sign in and out, and see what it is doing.

Exit status: 0 ok, 1 the daemon refused or failed, 2 usage, 3 the daemon is not
running, 4 not signed in. Data goes to stdout (`--json` for scripts); messages go to
stderr. Imports are kept lean: this runs once per shell command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from .._version import __version__
from ..client import BrokerClient, BrokerError, DaemonNotRunning, NotSignedIn
from ..client._channel import DEFAULT_TIMEOUT_SECONDS
from . import _commands

EXIT_FAILED = 1
EXIT_DAEMON_NOT_RUNNING = 3
EXIT_NOT_SIGNED_IN = 4

HOW_TO_START = (
    "Start it with `signin-brokerd` (it runs in the foreground), or where it is installed"
    " as a service: `systemctl --user start signin-broker.socket`."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="signin-broker",
        description="Talk to the signin-broker daemon: tokens, sign-in, status.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help="the daemon's socket (default: SIGNIN_BROKER_SOCKET"
        " or $XDG_RUNTIME_DIR/signin-broker/broker.sock)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for the daemon (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, run: Callable[..., int]) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print JSON for scripts")
        sub.set_defaults(run=run)
        return sub

    command("status", "show whether the daemon runs and who is signed in", _commands.status)
    token = command("token", "print an access token (for scripts)", _commands.token)
    token.add_argument("--account", default="", help="account id (default: the default account)")
    _repeatable(token, "--scope", "a scope the token must carry")
    token.add_argument(
        "--min-ttl",
        type=int,
        default=0,
        metavar="SECONDS",
        help="the token must stay valid at least this long",
    )
    token.add_argument(
        "--audience", default="", metavar="URI", help="the resource the token is for (RFC 8707)"
    )
    login = command("login", "sign in through the web browser", _commands.login)
    login.add_argument(
        "--no-browser", action="store_true", help="print the address instead of opening it"
    )
    login.add_argument(
        "--workspace", default="", metavar="ID", help="sign in to act within this workspace"
    )
    login.add_argument(
        "--wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the sign-in to complete (default 300)",
    )
    logout = command("logout", "sign out", _commands.logout)
    logout.add_argument("--account", default="", help="account id (default: the default account)")
    logout.add_argument(
        "--browser",
        action="store_true",
        help="also open the provider's logout page, ending its web session",
    )
    accounts = command(
        "accounts",
        "list the signed-in accounts; `use` makes one the default, `remove` deletes one",
        _commands.accounts,
    )
    account_actions = _actions(accounts)
    account_actions("list", "list the signed-in accounts (the default)")
    for action, text in (
        ("use", "make an account the default"),
        ("remove", "sign an account out and delete all the broker keeps of it"),
    ):
        account_actions(action, text).add_argument("account", help="the account's id")
    apps = command(
        "apps",
        "list the apps that use the broker and your decisions; allow, deny or ask for one",
        _commands.apps,
    )
    app_actions = _actions(apps)
    app_actions("list", "list the apps and your decisions (the default)")
    for action, text in (
        ("allow", "let an app get tokens (answers its waiting request)"),
        ("deny", "refuse an app (answers its waiting request)"),
        ("ask", "make each of an app's requests wait for your answer"),
        ("reset", "forget your decision: the default for new apps applies"),
    ):
        sub = app_actions(action, text)
        sub.add_argument("app", help="the app: its id, its path, or a file name of one app")
        if action == "allow":
            _repeatable(sub, "--account", "only this account")
            _repeatable(sub, "--scope", "at most this scope")
            sub.add_argument(
                "--pin", action="store_true", help="only the program file as it is now (sha256)"
            )
    audit = command(
        "audit", "show recent audit rows: who got tokens, what changed", _commands.audit
    )
    audit.add_argument("--account", default="", help="only rows of this account")
    audit.add_argument("--app", default="", help="only rows of this app (its id)")
    audit.add_argument("--limit", type=int, default=50, metavar="N", help="at most N rows")
    audit.add_argument("--before", type=int, default=0, metavar="ID", help="rows older than ID")
    return parser


def _repeatable(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """A flag that may be given several times, collected in a list (--scope -> scopes)."""
    name = flag.removeprefix("--")
    parser.add_argument(
        flag,
        dest=f"{name}s",
        action="append",
        default=[],
        metavar=name.upper(),
        help=f"{help_text}; repeat for more",
    )


def _actions(parser: argparse.ArgumentParser) -> Callable[[str, str], argparse.ArgumentParser]:
    """Sub-actions of a command (`apps allow APP`); without one, the command lists."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    parser.set_defaults(action="list")

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help_text, description=help_text)
        # Given after the action too; SUPPRESS keeps an earlier --json from being reset.
        sub.add_argument(
            "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON"
        )
        return sub

    return action


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    args = _parser().parse_args(argv)
    client = BrokerClient(args.socket, timeout=args.timeout)
    try:
        result: int = args.run(client, args)
    except DaemonNotRunning as error:
        _complain(f"{error.message}. {HOW_TO_START}")
        return EXIT_DAEMON_NOT_RUNNING
    except NotSignedIn as error:
        _complain(f"not signed in ({error.message}). Run `signin-broker login`.")
        return EXIT_NOT_SIGNED_IN
    except BrokerError as error:
        _complain(f"{error.code.name.lower()}: {error.message}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()
    return result


def run() -> NoReturn:
    """The console script: main(), then leave at once.

    Skipping the interpreter's teardown saves about 35 ms per command, most of it
    grpcio shutting down; the command has nothing left to clean up but its output.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away, e.g. `signin-broker status | head -1`
        code = code or EXIT_FAILED
    os._exit(code)


def _complain(message: str) -> None:
    print(f"signin-broker: {message}", file=sys.stderr)
