"""The options every command takes, before its name or after it: --socket and --timeout."""

from __future__ import annotations

import argparse

from ..locations import DEFAULT_TIMEOUT_SECONDS


def global_options(parser: argparse.ArgumentParser, defaults: dict[str, object]) -> None:
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
