"""What `python -m signin_broker_testing` runs: the stub provider in the foreground, for a demo.

Prints one JSON line, {"issuer": ..., "admin_token": ...}, then logs each request to
stderr until SIGTERM or SIGINT, when it stops and exits 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys

from .provider import StubProvider

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m signin_broker_testing",
        description="Run a stub OpenID Connect provider on loopback.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--access-token-ttl", type=int, default=3600, metavar="SECONDS")
    parser.add_argument("--issuer-path", default="", help='e.g. "/realms/test"')
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s"
    )
    # Blocked before the server thread starts, so only sigwait below ever receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        stub = StubProvider(
            access_token_ttl=args.access_token_ttl, issuer_path=args.issuer_path
        ).start(args.host, args.port)
    except (ValueError, OSError) as error:
        parser.error(str(error))
    try:
        print(json.dumps({"issuer": stub.issuer, "admin_token": stub.admin_token}), flush=True)
        signal.sigwait(STOP_SIGNALS)
    finally:
        stub.stop()
    return 0
