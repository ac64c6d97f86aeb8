"""The options every command takes, before its name or after it: --socket and --timeout."""

from __future__ import annotations

import argparse

from ._flags import GLOBAL_FLAGS, add_flags


def global_options(parser: argparse.ArgumentParser, *, before_the_command: bool = False) -> None:
    """--socket and --timeout: before the command, or after it (then they win).

    After it, an option not given leaves the one before the command in place (argparse's
    SUPPRESS); before it, an option not given is its default (_flags.py).
    """
    if before_the_command:
        add_flags(parser, GLOBAL_FLAGS)
    else:
        add_flags(parser, GLOBAL_FLAGS, **{flag.dest: argparse.SUPPRESS for flag in GLOBAL_FLAGS})
