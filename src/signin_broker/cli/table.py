"""The command table: each command, what it does, its flags and its body; a line read into one.

Each command names its flags and its body as `module:function`, and only the command
that runs is loaded: `status` never pays for the terminal UI, `git-credential` never
for gRPC. A command's parser too is built only when it runs: argparse spends about a
millisecond per parser, mostly looking up translations. Completion and the man page
need the whole tree at once (full_parser). A new command is its line here, its flags
in _options.py and its body in a module of its own or _commands.py.

Commands that talk to the daemon through the SDK get a client (_sdk.py); the others
(the JSON-path ones, the TUI, local set-up) make their own connection.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ._failures import EXIT_FAILED, EXIT_USAGE, complain, missing_package, tooling_missing
from ._flags import JSON_FLAG, add_flags
from ._globals import global_options

TUI_MISSING = "the terminal UI needs prompt_toolkit (the tui extra): pip install prompt_toolkit"


@dataclass(frozen=True, slots=True)
class Command:
    """One command: what it does, its flags and its body (each `module:function`)."""

    help: str
    options: str  # adds its flags to its parser
    run: str  # runs it: with the parsed arguments, and an SDK client when `client`
    client: bool = False
    # An optional package it needs, the exit status without it, and what to say.
    extra: tuple[str, int, str] | None = None


def _sdk(name: str, help_text: str, run: str = "_commands") -> Command:
    return Command(help_text, f"_options:{name}", f"{run}:{name}", client=True)


# The tui surface's cases read the screen with pyte and drive prompt_toolkit's UI.
TESTING = (
    "signin_broker_testing",
    EXIT_USAGE,
    tooling_missing("the conformance runner") + ", and pyte and prompt_toolkit for --surface tui",
)
COMMANDS: dict[str, Command] = {
    "status": Command(
        "show whether the daemon runs and who is signed in",
        "_options:no_options",
        "_commands:status",
        client=True,
    ),
    "token": Command(
        "print an access token (for scripts; --format for headers, env, kubectl)",
        "_options:token",
        "_token:token",
    ),
    "exec": Command(
        "run a command with a fresh access token in its environment",
        "_exec:add_options",
        "_exec:exec_command",
    ),
    "git-credential": Command(
        "git's credential helper: `git config credential.helper signin-broker`",
        "_git:add_options",
        "_git:git_credential",
    ),
    "docker-credential": Command(
        "docker's credential helper protocol (get, store, erase, list)",
        "_docker:add_options",
        "_docker:docker_credential",
    ),
    "login": _sdk("login", "sign in through the web browser", run="_signing"),
    "logout": _sdk("logout", "sign out", run="_signing"),
    "accounts": _sdk(
        "accounts",
        "list the signed-in accounts; `use` makes one the default, `remove` deletes one,"
        " `alias` names one",
    ),
    "apps": _sdk(
        "apps", "list the apps that use the broker and your decisions; allow, deny or ask for one"
    ),
    "audit": _sdk("audit", "show recent audit rows: who got tokens, what changed"),
    "forward": _sdk(
        "forward",
        "open a forward: a socket for an SSH session, container or sandbox that gets tokens only",
        run="_forward",
    ),
    "tui": Command(
        "a full-screen terminal UI: accounts, sign-in with a code, apps waiting for you",
        "_options:tui",
        "_tui:tui",
        extra=("prompt_toolkit", EXIT_FAILED, TUI_MISSING),
    ),
    "completion": Command(
        'print the shell\'s completion script: eval "$(signin-broker completion bash)"',
        "_completion:add_options",
        "_completion:completion",
    ),
    "install-browser": Command(
        "let browser extensions reach the broker: the native messaging manifests",
        "_browsers:add_options",
        "_browsers:install_browser",
    ),
    "native-host": Command(
        "the native messaging host a browser starts for an extension (not for people)",
        "_native_host:add_options",
        "_native_host:native_host",
    ),
    "proto": Command(
        "print the path of the API's broker.proto, for apps in other languages",
        "_options:no_options",
        "_proto:proto",
    ),
    "doctor": _sdk(
        "doctor",
        "check the set-up, each step with what to do; --bundle FILE for a support request",
        run="_doctor",
    ),
    "install-service": Command(
        "run the daemon as a user service (systemd socket activation, or launchd)",
        "_options:install_service",
        "_service:install_service",
    ),
    "conformance": Command(
        "run the contract's sign-in cases on a surface and record the registry row",
        "_conformance:add_options",
        "_conformance:conformance",
        extra=TESTING,
    ),
    "try": Command(
        "try it with no provider of your own: a stub provider and a daemon of their own,"
        " with your shell (or COMMAND) beside them",
        "_try:add_options",
        "_try:try_it",
    ),
    "client-secret": Command(
        "store the provider's client secret in the keyring, read from stdin (or delete it)",
        "_client_secret:add_options",
        "_client_secret:client_secret",
    ),
}


class Missing(Exception):
    """A command's optional package is not installed; `status` and `hint` say what then."""

    def __init__(self, status: int, hint: str) -> None:
        super().__init__(hint)
        self.status = status
        self.hint = hint


def _loaded(command: Command, reference: str) -> Any:
    """The function `module:function` names, its module loaded now; Missing without its extra."""
    module, _, function = reference.partition(":")
    try:
        return getattr(importlib.import_module(f"{__package__}.{module}"), function)
    except ModuleNotFoundError as error:
        if command.extra is None or not missing_package(error, command.extra[0]):
            raise
        _, status, hint = command.extra
        raise Missing(status, hint) from None


def run_command(argv: Sequence[str]) -> int:
    """Read the line, then run its command: with an SDK client, or by itself."""
    args = parse(argv)
    command = COMMANDS[args.command]
    try:
        body = _loaded(command, command.run)
    except Missing as missing:
        complain(missing.hint)
        return missing.status
    if command.client:  # the SDK (gRPC) is loaded for these only
        ran: int = _loaded(command, "_sdk:with_client")(body, args)
    else:
        ran = body(args)
    return ran


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The line read: global options, the command, then the command's own options."""
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions (argcomplete)
        _loaded(COMMANDS["completion"], "_completion:complete")(full_parser())
    top = _command_name_parser().parse_args(argv)
    parser = _command_parser(top.command)
    args, unknown = parser.parse_known_args(top.arguments)
    if unknown and not getattr(args, "takes_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # as parse_args says
    given = vars(args)
    args.socket = given.get("socket", top.socket)
    args.timeout = given.get("timeout", top.timeout)
    args.command = top.command
    return args


def full_parser() -> argparse.ArgumentParser:
    """The top-level parser with every command as a sub-parser (completion, man page)."""
    parser = _top_parser()
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        sub = commands.add_parser(name, help=command.help, description=command.help)
        add_flags(sub, [JSON_FLAG])
        _add_options(command, sub)
    return parser


def _command_name_parser() -> argparse.ArgumentParser:
    """The global options and the command's name; the command's own options come after."""
    parser = _top_parser()
    parser.add_argument("command", choices=COMMANDS, metavar="COMMAND")
    rest = parser.add_argument("arguments", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    rest.required = False  # else a missing COMMAND is reported as two missing arguments
    return parser


def _top_parser() -> argparse.ArgumentParser:
    """The program's description, --version and the global options."""
    width = max(map(len, COMMANDS)) + 2  # a long name never runs into its description
    parser = argparse.ArgumentParser(
        prog="signin-broker",
        description="Talk to the signin-broker daemon: tokens, sign-in, status.",
        epilog="commands:\n"
        + "\n".join(f"  {name:<{width}}{command.help}" for name, command in COMMANDS.items())
        + "\n\n`signin-broker COMMAND --help` shows a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    global_options(parser, before_the_command=True)
    return parser


def _command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command, with --json, the global options and its own options."""
    command = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"signin-broker {name}", description=command.help)
    add_flags(parser, [JSON_FLAG])
    global_options(parser)
    _add_options(command, parser)
    return parser


def _add_options(command: Command, parser: argparse.ArgumentParser) -> None:
    """The command's own flags; without its optional package, a parser that says so."""
    try:
        add_options = _loaded(command, command.options)
    except Missing as missing:
        # The command then says what to install, whatever flags it was given.
        parser.description = f"Not installed: {missing.hint}."
        parser.set_defaults(takes_any_arguments=True)
        return
    add_options(parser)
