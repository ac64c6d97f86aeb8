"""`signin-broker tui`: the full-screen terminal UI (signin_broker.tui), when it is installed."""

from __future__ import annotations

import argparse
import sys

from ._failures import EXIT_FAILED


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of `signin-broker tui`."""
    parser.add_argument(
        "--workspace", default="", help="sign-ins begun from the screen act in this workspace"
    )


def tui(args: argparse.Namespace) -> int:
    """Run the screen; say what to install, or that a terminal is needed, when it cannot."""
    try:
        from ..tui.app import run
    except ImportError as error:
        if error.name is None or not error.name.startswith("prompt_toolkit"):
            raise
        print(
            "signin-broker: the terminal UI needs prompt_toolkit: pip install 'signin-broker[tui]'",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("signin-broker: the terminal UI needs a terminal", file=sys.stderr)
        return EXIT_FAILED
    return run(args.socket, workspace=args.workspace)
