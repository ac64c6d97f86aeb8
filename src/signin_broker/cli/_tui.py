"""`signin-broker tui`: the full-screen terminal UI (signin_broker.tui, the `[tui]` extra).

Without prompt_toolkit the command table says what to install (table.Command.extra).
"""

from __future__ import annotations

import argparse
import sys

from ..tui.app import run
from ._failures import EXIT_FAILED


def tui(args: argparse.Namespace) -> int:
    """Run the screen; say that a terminal is needed, when it cannot."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("signin-broker: the terminal UI needs a terminal", file=sys.stderr)
        return EXIT_FAILED
    return run(args.socket, workspace=args.workspace)
