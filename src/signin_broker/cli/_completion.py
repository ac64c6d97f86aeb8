"""Shell completion and the manual page, both from one parser of every command.

The CLI parses in two steps (the command's own parser is built only when it runs, see
main._parser), which keeps a one-shot `signin-broker token` cheap. Completion and the
man page need the whole tree at once: main.full_parser() builds it. Completion is
argcomplete's: the shell sets _ARGCOMPLETE and runs the command, which answers with
candidates; a plain run only looks up that variable.
"""

from __future__ import annotations

import argparse
import os
import sys

SHELLS = ("bash", "zsh", "fish")


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request for `parser` and exit; nothing when none was made."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def completion(args: argparse.Namespace) -> int:
    """Print the shell's completion script, to be sourced (or installed) by the user."""
    from argcomplete.shell_integration import shellcode

    sys.stdout.write(shellcode(["signin-broker"], shell=args.shell))
    return 0
