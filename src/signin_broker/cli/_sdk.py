"""How a command that talks to the daemon through the SDK runs: with a client, its refusals said.

The exit statuses are _failures.py's: 3 when no daemon runs, 4 when not signed in, 1
for any other refusal, each with the one line that says it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from ..client import BrokerClient, BrokerError, DaemonNotRunning, NotSignedIn
from ._failures import not_running, not_signed_in, refused


def with_client(
    body: Callable[[BrokerClient, argparse.Namespace], int], args: argparse.Namespace
) -> int:
    """Run the command with a client of the daemon, closed after."""
    client = BrokerClient(args.socket, timeout=args.timeout)
    try:
        return body(client, args)
    except DaemonNotRunning as error:
        if args.command == "status" and args.json:  # a script reads stdout, not stderr
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
