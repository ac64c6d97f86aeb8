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

from .._version import __version__
from ..locations import DEFAULT_TIMEOUT_SECONDS
from ._failures import EXIT_FAILED, not_running, not_signed_in, refused

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from ..client import BrokerClient


def _parser() -> argparse.ArgumentParser:
    """The global options and the command's name; the command's own options come after.

    Each command's parser is built only when it runs (see _command_parser): argparse
    spends about a millisecond per parser, mostly looking up translations, and the
    one-shot `signin-broker token` should not pay for fifteen.
    """
    parser = _top_parser()
    parser.add_argument("command", choices=COMMANDS, metavar="COMMAND")
    rest = parser.add_argument("arguments", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    rest.required = False  # else a missing COMMAND is reported as two missing arguments
    return parser


def full_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command as a sub-parser (completion, man page)."""
    parser = _top_parser()
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, add_options, _) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="print JSON for scripts")
        add_options(sub)
    return parser


def _top_parser() -> argparse.ArgumentParser:
    """The program's description, --version and the global options."""
    width = max(map(len, COMMANDS)) + 2  # a long name never runs into its description
    parser = argparse.ArgumentParser(
        prog="signin-broker",
        description="Talk to the signin-broker daemon: tokens, sign-in, status.",
        epilog="commands:\n"
        + "\n".join(f"  {name:<{width}}{text}" for name, (text, _, _) in COMMANDS.items())
        + "\n\n`signin-broker COMMAND --help` shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _global_options(parser, defaults={"socket": None, "timeout": DEFAULT_TIMEOUT_SECONDS})
    return parser


def _global_options(parser: argparse.ArgumentParser, defaults: dict[str, object]) -> None:
    """--socket and --timeout: before the command, or after it (then they win)."""
    parser.add_argument(
        "--socket",
        default=defaults.get("socket", argparse.SUPPRESS),
        metavar="PATH",
        help="the daemon's socket (default: SIGNIN_BROKER_SOCKET"
        " or $XDG_RUNTIME_DIR/signin-broker/broker.sock)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=defaults.get("timeout", argparse.SUPPRESS),
        metavar="SECONDS",
        help=f"how long to wait for the daemon (default {DEFAULT_TIMEOUT_SECONDS:g})",
    )


def _command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, with --json, the global options and its own options."""
    help_text, add_options, run = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"signin-broker {name}", description=help_text)
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    _global_options(parser, defaults={})
    parser.set_defaults(run=run)
    add_options(parser)
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (argcomplete)
        from ._completion import complete_if_asked

        complete_if_asked(full_parser())
    top = _parser().parse_args(argv)
    args = _command_parser(top.command).parse_args(top.arguments)
    given = vars(args)
    args.socket = given.get("socket", top.socket)
    args.timeout = given.get("timeout", top.timeout)
    args.command = top.command
    return args


def _no_options(parser: argparse.ArgumentParser) -> None:
    del parser


def _lean_options(module: str) -> Callable[[argparse.ArgumentParser], None]:
    """A lean command's options, from its own module (imported when the command runs)."""

    def add_options(parser: argparse.ArgumentParser) -> None:
        _lean_module(module).add_options(parser)

    return add_options


class _Lean:
    """A command that makes its own connection: no SDK client for it to import or close.

    The JSON-path commands use the standard library only; the TUI an asyncio client.
    main() runs it with the arguments alone, before any client is made.
    """

    def __init__(self, module: str, function: str) -> None:
        self._module, self._function = module, function

    def __call__(self, args: argparse.Namespace) -> int:
        command: Callable[[argparse.Namespace], int] = getattr(
            _lean_module(self._module), self._function
        )
        return command(args)


def _lean_module(name: str) -> Any:
    return __import__(f"{__package__}.{name}", fromlist=["_"])


def _login_options(parser: argparse.ArgumentParser) -> None:
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


def _logout_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--account", default="", help="account id (default: the default account)")
    parser.add_argument(
        "--browser",
        action="store_true",
        help="also open the provider's logout page, ending its web session",
    )


def _accounts_options(parser: argparse.ArgumentParser) -> None:
    action = _actions(parser)
    action("list", "list the signed-in accounts (the default)")
    for name, text in (
        ("use", "make an account the default"),
        ("remove", "sign an account out and delete all the broker keeps of it"),
    ):
        action(name, text).add_argument("account", help="the account's id")


def _apps_options(parser: argparse.ArgumentParser) -> None:
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
            _repeatable(sub, "--account", "only this account")
            _repeatable(sub, "--scope", "at most this scope")
            sub.add_argument(
                "--pin", action="store_true", help="only the program file as it is now (sha256)"
            )
            sub.add_argument(
                "--id-token",
                action="store_true",
                help="the account's ID token as well (kubectl's OIDC set-up wants it)",
            )


def _audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--account", default="", help="only rows of this account")
    parser.add_argument("--app", default="", help="only rows of this app (its id)")
    parser.add_argument("--limit", type=int, default=50, metavar="N", help="at most N rows")
    parser.add_argument("--before", type=int, default=0, metavar="ID", help="rows older than ID")


def _install_service_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="print the files and commands; change nothing"
    )
    parser.add_argument("--uninstall", action="store_true", help="stop and remove the service")


def _conformance_options(parser: argparse.ArgumentParser) -> None:
    from ._conformance import add_options

    add_options(parser)


def _conformance(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._conformance import conformance

    return conformance(client, args)


def _client_secret_options(parser: argparse.ArgumentParser) -> None:
    from ._client_secret import add_options

    add_options(parser)


def _client_secret(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._client_secret import client_secret

    return client_secret(client, args)


def _install_service(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._service import install_service

    return install_service(client, args)


def _command(name: str) -> Callable[..., int]:
    """A command of _commands, imported when it runs: it brings in the gRPC SDK."""

    def run(client: BrokerClient, args: argparse.Namespace) -> int:
        from . import _commands

        command: Callable[[BrokerClient, argparse.Namespace], int] = getattr(_commands, name)
        return command(client, args)

    return run


# name: (what it does, its options, what runs it)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[..., int]]] = {
    "status": (
        "show whether the daemon runs and who is signed in",
        _no_options,
        _command("status"),
    ),
    "token": (
        "print an access token (for scripts; --format for headers, env, kubectl)",
        _lean_options("_token"),
        _Lean("_token", "token"),
    ),
    "exec": (
        "run a command with a fresh access token in its environment",
        _lean_options("_exec"),
        _Lean("_exec", "exec_command"),
    ),
    "git-credential": (
        "git's credential helper: `git config credential.helper signin-broker`",
        _lean_options("_git"),
        _Lean("_git", "git_credential"),
    ),
    "docker-credential": (
        "docker's credential helper protocol (get, store, erase, list)",
        _lean_options("_docker"),
        _Lean("_docker", "docker_credential"),
    ),
    "login": ("sign in through the web browser", _login_options, _command("login")),
    "logout": ("sign out", _logout_options, _command("logout")),
    "accounts": (
        "list the signed-in accounts; `use` makes one the default, `remove` deletes one",
        _accounts_options,
        _command("accounts"),
    ),
    "apps": (
        "list the apps that use the broker and your decisions; allow, deny or ask for one",
        _apps_options,
        _command("apps"),
    ),
    "audit": (
        "show recent audit rows: who got tokens, what changed",
        _audit_options,
        _command("audit"),
    ),
    "tui": (
        "a full-screen terminal UI: accounts, sign-in with a code, apps waiting for you",
        _lean_options("_tui"),
        _Lean("_tui", "tui"),
    ),
    "completion": (
        'print the shell\'s completion script: eval "$(signin-broker completion bash)"',
        _lean_options("_completion"),
        _Lean("_completion", "completion"),
    ),
    "proto": (
        "print the path of the API's broker.proto, for apps in other languages",
        _no_options,
        _Lean("_proto", "proto"),
    ),
    "install-service": (
        "run the daemon as a user service (systemd socket activation, or launchd)",
        _install_service_options,
        _install_service,
    ),
    "conformance": (
        "run the contract's sign-in cases on a surface and record the registry row",
        _conformance_options,
        _conformance,
    ),
    "client-secret": (
        "store the provider's client secret in the keyring, read from stdin (or delete it)",
        _client_secret_options,
        _client_secret,
    ),
}


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
        _global_options(sub, defaults={})
        return sub

    return action


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    args = _parse(argv)
    if isinstance(args.run, _Lean):  # no gRPC to import, no client to make
        lean: int = args.run(args)
        return lean
    from ..client import BrokerClient, BrokerError, DaemonNotRunning, NotSignedIn

    client = BrokerClient(args.socket, timeout=args.timeout)
    try:
        result: int = args.run(client, args)
    except DaemonNotRunning as error:
        if args.command == "status" and args.json:  # a script reads stdout, not stderr
            import json

            print(json.dumps({"running": False, "socket": error.socket_path}))
        return not_running(error.socket_path)
    except NotSignedIn as error:
        return not_signed_in(error.message)
    except BrokerError as error:
        return refused(error.code.name.lower(), error.message)
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
    _finish(main)


def git_credential_helper() -> NoReturn:
    """`git-credential-signin-broker get|store|erase`: the program name git looks for."""
    _finish(lambda: main(["git-credential", *sys.argv[1:]]))


def docker_credential_helper() -> NoReturn:
    """`docker-credential-signin-broker get|store|erase|list`: the name docker looks for."""
    _finish(lambda: main(["docker-credential", *sys.argv[1:]]))


def _finish(command: Callable[[], int]) -> NoReturn:
    """Run the command, flush its output and leave; a reader that went away ends it quietly.

    `signin-broker audit --json | head -1` closes the pipe while the command writes (or
    flushes): that is the reader's choice, not a failure worth a traceback.
    """
    try:
        code = command()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = EXIT_FAILED
    os._exit(code)
