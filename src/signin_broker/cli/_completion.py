"""Shell completion: the shell's script, and the candidates argcomplete answers the shell with.

The CLI builds only the running command's parser (table.py); completion needs the whole
tree at once (table.full_parser). argcomplete's way: the shell sets _ARGCOMPLETE and
runs the command, which answers with candidates; a plain run only looks up that
variable, and loads this module (and argcomplete) only when it is set.
"""

from __future__ import annotations

import argparse
import sys

import argcomplete
from argcomplete.shell_integration import shellcode

SHELLS = ("bash", "zsh", "fish")


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request for `parser`, and exit."""
    argcomplete.autocomplete(parser)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The shell to write the script for."""
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")


def completion(args: argparse.Namespace) -> int:
    """Print the shell's completion script, to be sourced (or installed) by the user."""
    sys.stdout.write(shellcode(["signin-broker"], shell=args.shell))
    return 0
