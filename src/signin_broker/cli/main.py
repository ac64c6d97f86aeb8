"""`signin-broker`: ask the daemon for tokens, sign in and out, and see what it is doing.

Exit status: 0 ok, 1 the daemon refused or failed, 2 usage, 3 the daemon is not
running, 4 not signed in. Data goes to stdout (`--json` for scripts); messages go to
stderr. Imports are kept lean: this runs once per shell command.
"""

from __future__ import annotations

import os
import sys

from .._version import __version__
from ..locations import DEFAULT_TIMEOUT_SECONDS
from ._failures import (
    CONFORMANCE_MISSING,
    EXIT_FAILED,
    EXIT_USAGE,
    complain,
    missing_package,
    not_running,
    not_signed_in,
    refused,
)
from ._token_arguments import read_token_arguments

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from ..client import BrokerClient


def _parser() -> argparse.ArgumentParser:
    """The global options and the command's name; the command's own options come after.

    Each command's parser is built only when it runs (see _command_parser): argparse
    spends about a millisecond per parser, mostly looking up translations, and the
    one-shot `signin-broker token` should not pay for fifteen.
    """
    import argparse

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
    import argparse

    from ._globals import global_options

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
    global_options(parser, defaults={"socket": None, "timeout": DEFAULT_TIMEOUT_SECONDS})
    return parser


def _command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, with --json, the global options and its own options."""
    import argparse

    from ._globals import global_options

    help_text, add_options, run = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"signin-broker {name}", description=help_text)
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    global_options(parser, defaults={})
    parser.set_defaults(run=run)
    add_options(parser)
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (argcomplete)
        from ._completion import complete_if_asked

        complete_if_asked(full_parser())
    top = _parser().parse_args(argv)
    parser = _command_parser(top.command)
    args, unknown = parser.parse_known_args(top.arguments)
    if unknown and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # as parse_args says
    given = vars(args)
    args.socket = given.get("socket", top.socket)
    args.timeout = given.get("timeout", top.timeout)
    args.command = top.command
    return args


def _no_options(parser: argparse.ArgumentParser) -> None:
    del parser


def _sdk_options(command: str) -> Callable[[argparse.ArgumentParser], None]:
    """An SDK command's options, from _options (imported when the command runs)."""

    def add_options(parser: argparse.ArgumentParser) -> None:
        getattr(_lean_module("_options"), command)(parser)

    return add_options


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


def _conformance(client: BrokerClient, args: argparse.Namespace) -> int:
    try:
        from ._conformance import conformance
    except ModuleNotFoundError as error:
        if not missing_package(error, "signin_broker_testing"):
            raise
        complain(CONFORMANCE_MISSING)
        return EXIT_USAGE

    return conformance(client, args)


def _client_secret(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._client_secret import client_secret

    return client_secret(client, args)


def _install_service(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._service import install_service

    return install_service(client, args)


def _doctor(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._doctor import doctor

    return doctor(client, args)


def _forward(client: BrokerClient, args: argparse.Namespace) -> int:
    from ._forward import forward

    return forward(client, args)


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
    "login": ("sign in through the web browser", _sdk_options("login"), _command("login")),
    "logout": ("sign out", _sdk_options("logout"), _command("logout")),
    "accounts": (
        "list the signed-in accounts; `use` makes one the default, `remove` deletes one,"
        " `alias` names one",
        _sdk_options("accounts"),
        _command("accounts"),
    ),
    "apps": (
        "list the apps that use the broker and your decisions; allow, deny or ask for one",
        _sdk_options("apps"),
        _command("apps"),
    ),
    "audit": (
        "show recent audit rows: who got tokens, what changed",
        _sdk_options("audit"),
        _command("audit"),
    ),
    "forward": (
        "open a forward: a socket for an SSH session, container or sandbox that gets tokens only",
        _sdk_options("forward"),
        _forward,
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
    "install-browser": (
        "let browser extensions reach the broker: the native messaging manifests",
        _lean_options("_browsers"),
        _Lean("_browsers", "install_browser"),
    ),
    "native-host": (
        "the native messaging host a browser starts for an extension (not for people)",
        _lean_options("_native_host"),
        _Lean("_native_host", "native_host"),
    ),
    "proto": (
        "print the path of the API's broker.proto, for apps in other languages",
        _no_options,
        _Lean("_proto", "proto"),
    ),
    "doctor": (
        "check the set-up, each step with what to do; --bundle FILE for a support request",
        _sdk_options("doctor"),
        _doctor,
    ),
    "install-service": (
        "run the daemon as a user service (systemd socket activation, or launchd)",
        _sdk_options("install_service"),
        _install_service,
    ),
    "conformance": (
        "run the contract's sign-in cases on a surface and record the registry row",
        _sdk_options("conformance"),
        _conformance,
    ),
    "client-secret": (
        "store the provider's client secret in the keyring, read from stdin (or delete it)",
        _sdk_options("client_secret"),
        _client_secret,
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status."""
    given = sys.argv[1:] if argv is None else argv
    quick = None if "_ARGCOMPLETE" in os.environ else read_token_arguments(given)
    if quick is not None:  # `signin-broker token` as scripts run it: no argparse to load
        from ._token import token

        return token(quick)
    return _run(_parse(given))


def _run(args: argparse.Namespace) -> int:
    """Run the command argparse read: a lean one by itself, the others with an SDK client."""
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


def native_host() -> NoReturn:
    """`signin-broker-native-host`: the program the browsers' manifests name (their `path`)."""
    _finish(lambda: main(["native-host", *sys.argv[1:]]))


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
