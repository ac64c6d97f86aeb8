"""`git-credential-signin-broker`: git's credential helper, answering with a broker token.

    git config --global credential.https://git.example.com.helper "signin-broker --username oauth2"

git runs `git-credential-signin-broker [those options] get|store|erase` and talks the
credential protocol (git-credential(1)) on stdin and stdout. Per-host settings live in
git's own config, as the helper's options. `get` answers the token as the password,
with its expiry (`password_expiry_utc`), so git asks again once it expires; `store` has
nothing to keep (the broker owns the token); `erase`, which git sends when the server
refused the password, renews the token at the daemon if it is the one refused, so the
next `get` brings a fresh one. A token goes only to https, or to http on this machine.

When no token can be had (daemon not running, not signed in, app denied), `get` says why
on stderr and answers nothing, so git goes on to its next helper or its prompt.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from ._failures import EXIT_USAGE, Refused, complain
from ._json_client import fetch, read_input, renew
from ._options import add_request_options

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def add_options(parser: argparse.ArgumentParser) -> None:
    add_request_options(parser, min_ttl=60)  # a clone or push gets a minute's use at least
    parser.add_argument(
        "--username",
        default="oauth2",
        help='the user name git sends with the token (default "oauth2", as GitLab takes;'
        ' GitHub takes "x-access-token")',
    )
    parser.add_argument("operation", choices=("get", "store", "erase"), help="git's request")


def git_credential(args: argparse.Namespace) -> int:
    """Answer one request of git's credential protocol."""
    try:
        request = _parsed(read_input())
    except ValueError as error:
        complain(f"git-credential: {error}")
        return EXIT_USAGE
    if args.operation == "store" or not _may_receive_a_token(request):
        return 0
    try:
        issued = fetch(args, tool="git")
    except Refused:
        return 0  # said on stderr; git goes on to its next helper or prompt
    token = str(issued["access_token"])
    if args.operation == "erase":
        if request.get("password") == token:  # the one the server refused: renew it
            with contextlib.suppress(Refused):  # said; the next `get` tries again
                renew(args)
        return 0
    expires = int(str(issued.get("expires_at_unix", 0)))
    sys.stdout.write(f"username={args.username}\npassword={token}\n")
    if expires:
        sys.stdout.write(f"password_expiry_utc={expires}\n")
    return 0


def _parsed(data: bytes) -> dict[str, str]:
    """The `key=value` lines git sends, up to a blank line or the end."""
    request: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.strip():
            break
        key, equals, value = line.partition("=")
        if equals:
            request[key] = value.rstrip("\r")
    return request


def _may_receive_a_token(request: dict[str, str]) -> bool:
    """Whether the token may go there: https anywhere, plain http only to this machine."""
    protocol, host = request.get("protocol", ""), request.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    return protocol == "https" or (protocol == "http" and name in LOOPBACK_HOSTS)
