"""`signin-broker client-secret`: keep a client secret in the OS keyring, where the daemon looks.

The secret is read from stdin (typed without echo at a terminal), never from the
command line, where `ps` would show it to every user of the machine. The daemon reads
it at start (`client:<client_id>:secret`), so it takes effect at the next start.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from ..identities import alias_named
from ..oidc.client_auth import ClientAuthError
from ..oidc.credentials import check_secret, secret_name
from ..session.validation import check_provider
from ..store.keys import KeyStoreUnavailable, the_keyring
from ._failures import EXIT_FAILED, EXIT_USAGE

MAX_SECRET_CHARACTERS = 4096


def add_options(parser: argparse.ArgumentParser) -> None:
    """`set` or `delete`, and whose secret."""
    parser.add_argument(
        "action",
        choices=("set", "delete"),
        help="set: read the secret from stdin and store it; delete: remove it",
    )
    parser.add_argument(
        "--client-id",
        required=True,
        metavar="ID",
        help="the client the secret belongs to: the daemon's client_id setting",
    )
    parser.add_argument(
        "--provider",
        default="",
        metavar="ALIAS",
        help="the provider whose client it is, by its alias (default: the main one)",
    )


def client_secret(args: argparse.Namespace) -> int:
    """Store or remove the secret; the daemon need not run."""
    try:
        provider = check_provider(args.provider)
    except ValueError as error:
        print(f"signin-broker: {error}", file=sys.stderr)
        return EXIT_USAGE
    name = secret_name(args.client_id, alias_named(provider))
    try:
        keys = the_keyring()
        if args.action == "delete":
            keys.delete(name)
        else:
            keys.set(name, check_secret(_read_secret()).encode())
    except ClientAuthError as error:
        print(f"signin-broker: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyStoreUnavailable as error:
        print(
            f"signin-broker: {error}; or keep the secret in a 0600 file named by the"
            " daemon's client_secret_file setting",
            file=sys.stderr,
        )
        return EXIT_FAILED
    done = "removed from" if args.action == "delete" else "stored in"
    if args.json:
        print(json.dumps({"client_id": args.client_id, "action": args.action, "name": name}))
    else:
        print(
            f"The client secret of {args.client_id} is {done} the {keys.description}."
            " Restart the daemon for it to take effect.",
            file=sys.stderr,
        )
    return 0


def _read_secret() -> str:
    """The secret from stdin: typed without echo at a terminal, else one line piped in."""
    if sys.stdin.isatty():
        return getpass.getpass("Client secret (not shown): ")
    text = sys.stdin.read(MAX_SECRET_CHARACTERS + 1)
    if len(text) > MAX_SECRET_CHARACTERS:
        raise ClientAuthError(f"the client secret is over {MAX_SECRET_CHARACTERS} characters")
    return text
