"""The flags of each command whose body needs none of its own modules to say them.

The SDK commands', the token command's, and those the JSON-path commands share
(add_request_options); the last two are made from their declarations in _flags.py,
which the one-shot `token` reads its line with, without argparse.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from ._flags import REQUEST_FLAGS, TOKEN_FLAGS, add_flags
from ._globals import global_options


def add_request_options(parser: argparse.ArgumentParser, min_ttl: int = 0) -> None:
    """What a token is asked for with: account, scopes, lifetime left, audience."""
    add_flags(parser, REQUEST_FLAGS, min_ttl=min_ttl)


def token(parser: argparse.ArgumentParser) -> None:
    """The token command's options: the request's, then how to print it."""
    add_request_options(parser)
    add_flags(parser, TOKEN_FLAGS)


def login(parser: argparse.ArgumentParser) -> None:
    """Where to sign in, what to ask the provider for, and how the person gets there."""
    _where_to_sign_in(parser)
    _asked_of_the_provider(parser)
    _how_to_get_there(parser)


def _where_to_sign_in(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-browser", action="store_true", help="print the address instead of opening it"
    )
    parser.add_argument(
        "--workspace", default="", metavar="ID", help="sign in to act within this workspace"
    )
    parser.add_argument(
        "--redirect-to",
        default="",
        metavar="PATH",
        help='the loopback page the browser lands on afterwards (e.g. "/dashboard?tab=apps")',
    )
    parser.add_argument(
        "--device",
        action="store_true",
        help="sign in on another device (a code and a QR code to scan), for a TV or over SSH",
    )
    parser.add_argument(
        "--provider",
        default="",
        metavar="ALIAS",
        help='the identity provider to sign in at, by its alias ("main" for the top-level one;'
        " default: the daemon's default_provider; see `signin-broker status`)",
    )


def _asked_of_the_provider(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--login-hint", default="", metavar="NAME", help="the account to suggest at the provider"
    )
    parser.add_argument(
        "--prompt",
        default="",
        metavar="WORDS",
        help='ask the provider to "select_account", "login" again or ask for "consent"',
    )
    parser.add_argument("--acr-values", default="", metavar="VALUES", help="the strength asked for")
    parser.add_argument(
        "--ui-locales",
        default="",
        metavar="TAGS",
        help='languages for the provider\'s pages, e.g. "de en"',
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another authorize parameter the provider knows (repeatable)",
    )


def _how_to_get_there(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--browser-command",
        default=os.environ.get("SIGNIN_BROKER_BROWSER", ""),
        metavar="COMMAND",
        help="open the sign-in with this command ({url} stands for the address; default:"
        " the system's browser, or $SIGNIN_BROKER_BROWSER)",
    )
    parser.add_argument(
        "--paste",
        action="store_true",
        help="sign in with a browser on another device, then paste the address it ended on"
        " (for providers without device sign-in)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for the sign-in to complete (default 300)",
    )


def logout(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--account",
        default="",
        help="the account: its id, alias, e-mail or login (default: the default account)",
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="also open the provider's logout page, ending its web session",
    )


def accounts(parser: argparse.ArgumentParser) -> None:
    action = _actions(parser)
    action("list", "list the signed-in accounts (the default)")
    for name, text in (
        ("use", "make an account the default"),
        ("remove", "sign an account out and delete all the broker keeps of it, aliases too"),
    ):
        action(name, text).add_argument("account", help="its id, alias, e-mail or login")
    alias = action("alias", "give an account a short name of your choosing, or remove one")
    alias.add_argument(
        "name", help="the alias: up to 32 lower-case letters, digits, '.', '-' or '_'"
    )
    alias.add_argument(
        "account", nargs="?", default="", help="the account it names: its id, e-mail or login"
    )
    alias.add_argument("--remove", action="store_true", help="remove the alias instead")
    alias.add_argument(
        "--force",
        action="store_true",
        help="set it even if it is another account's login, which it then hides",
    )


def apps(parser: argparse.ArgumentParser) -> None:
    action = _actions(parser)
    action("list", "list the apps and your decisions (the default)")
    for name, text in (
        ("allow", "let an app get tokens (answers its waiting request)"),
        ("deny", "refuse an app (answers its waiting request)"),
        ("ask", "make each of an app's requests wait for your answer"),
        ("reset", "forget your decision: the default for new apps applies"),
    ):
        sub = action(name, text)
        sub.add_argument("app", help="the app: its id, its path, or a file name of one app")
        if name in ("allow", "deny"):
            sub.add_argument(
                "--once",
                action="store_true",
                help="answer only its waiting request and record nothing: the next one asks",
            )
        if name == "allow":
            _repeatable(sub, "--account", "only this account (its id, alias, e-mail or login)")
            _repeatable(sub, "--scope", "at most this scope")
            sub.add_argument(
                "--pin", action="store_true", help="only the program file as it is now (sha256)"
            )
            sub.add_argument(
                "--id-token",
                action="store_true",
                help="the account's ID token as well (kubectl's OIDC set-up wants it)",
            )
            _repeatable(sub, "--origin", "a browser extension: tokens for this web origin")


def audit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--account", default="", help="only rows of this account (its id, alias, e-mail or login)"
    )
    parser.add_argument("--app", default="", help="only rows of this app (its id)")
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="at most N rows")
    parser.add_argument("--before", type=int, default=0, metavar="ID", help="rows older than ID")


FORWARD_TTL_SECONDS = 8 * 3600  # a working day; a forward never stays open unasked


def forward(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--name", help="open a forward of this name (lower-case letters, digits)")
    what.add_argument("--close", metavar="NAME", help="close the forward of this name now")
    what.add_argument("--list", action="store_true", help="list the open forwards and their use")
    parser.add_argument(
        "--ttl",
        type=int,
        default=FORWARD_TTL_SECONDS,
        metavar="SECONDS",
        help=f"close it by itself after this long (default {FORWARD_TTL_SECONDS})",
    )
    _repeatable(parser, "--account", "give tokens of this account (default: the default one)")
    parser.add_argument(
        "--all-accounts", action="store_true", help="give tokens of every signed-in account"
    )
    _repeatable(parser, "--scope", "tokens carry at most this scope (down-scoped)")
    parser.add_argument("--audience", default="", metavar="URI", help="every token is for this")
    parser.add_argument(
        "--confirm",
        action="store_true",
        help="each new connection's first request waits for `signin-broker apps allow --once"
        " forward:NAME`",
    )
    parser.add_argument(
        "--id-token", action="store_true", help="give the ID token too when asked (never else)"
    )
    parser.add_argument(
        "--forward-socket",
        default="",
        metavar="PATH",
        help="put its socket here (in a folder of yours only you can write to);"
        " default: $XDG_RUNTIME_DIR/signin-broker/forwards/NAME.sock",
    )


def install_service(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="print the files and commands; change nothing"
    )
    parser.add_argument("--uninstall", action="store_true", help="stop and remove the service")


def doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bundle",
        metavar="FILE",
        help="also write a support bundle (versions, settings, the daemon's last log lines,"
        " the findings; no token or secret) to FILE",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="the daemon's config file, when no daemon runs (a running one's own is used)",
    )
    parser.add_argument(
        "--forget-dpop",
        action="store_true",
        help="first forget that providers require DPoP of the broker's clients, as sign-ins"
        " learned it: the next sign-in gets Bearer tokens unless the provider shows it again",
    )


def tui(parser: argparse.ArgumentParser) -> None:
    """The options of `signin-broker tui`."""
    parser.add_argument(
        "--workspace", default="", help="sign-ins begun from the screen act in this workspace"
    )


def no_options(parser: argparse.ArgumentParser) -> None:
    """A command without options of its own."""
    del parser


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
        global_options(sub)
        return sub

    return action
