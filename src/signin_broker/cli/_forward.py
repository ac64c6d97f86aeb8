"""`signin-broker forward`: open, list and close forwards, and how `status` reads through one.

A forward is a socket of its own that gives the tokens it allows to whatever reaches it:
an SSH session (`ssh -R`), a container (a bind mount), a Flatpak. Opening one prints its
socket's path on stdout, for scripts: `ssh -R /run/user/1000/b.sock:"$(signin-broker
forward --name box)" box`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..client import BrokerClient, Forward, Status
from ._output import duration, key_values, moment, print_json, remark, table


def forward(client: BrokerClient, args: argparse.Namespace) -> int:
    """Open, close or list forwards."""
    if args.list:
        listed = client.forwards()
        if args.json:
            return print_json(listed)
        print(table(_HEADERS, [_row(f) for f in listed]) if listed else "no forward is open")
        return 0
    if args.close:
        closed = client.close_forward(args.close)
        if args.json:
            return print_json(closed)
        print(
            f"forward {closed.name} closed ({closed.tokens_issued} tokens given,"
            f" {closed.connections_total} connections)",
            file=sys.stderr,
        )
        return 0
    opened = client.open_forward(
        args.name,
        ttl_seconds=args.ttl,
        accounts=args.accounts,
        all_accounts=args.all_accounts,
        scopes=args.scopes,
        audience=args.audience,
        id_token=args.id_token,
        confirm=args.confirm,
        socket_path=_absolute(args.forward_socket),
    )
    if args.json:
        return print_json(opened)
    print(opened.socket_path)
    remark(
        f"forward {opened.name} open until {moment(opened.expires_at_unix)}"
        f" ({_accounts(opened)}); on the other side: SIGNIN_BROKER_SOCKET=<where it lands>."
        f" Close it: signin-broker forward --close {opened.name}"
    )
    return 0


def print_status(info: Status, forward: Forward) -> int:
    """`signin-broker status` through a forward: what it is a forward of, and what it gives."""
    default = info.default
    print(
        key_values(
            [
                ("forward", f"{forward.name} of signin-broker on {forward.host or 'its host'}"),
                ("closes", f"in {duration(forward.expires_at_unix - time.time())}"),
                ("accounts", _accounts(forward)),
                ("scopes", " ".join(forward.scopes) or "the sign-in's"),
                *([("audience", forward.audience)] if forward.audience else []),
                ("ID token", "when asked" if forward.id_token else "never"),
                ("confirm", "each new connection" if forward.confirm else "no"),
                ("version", info.version),
                ("default account", default.id if default else "-"),
            ]
        )
    )
    return 0


_HEADERS = ["NAME", "SOCKET", "ACCOUNTS", "SCOPES", "CLOSES", "TOKENS", "LAST USED", "CONNECTIONS"]


def _row(forward: Forward) -> list[str]:
    return [
        forward.name + (" (confirm)" if forward.confirm else ""),
        forward.socket_path,
        _accounts(forward),
        " ".join(forward.scopes) or "all",
        moment(forward.expires_at_unix),
        str(forward.tokens_issued),
        moment(forward.last_used_unix) if forward.last_used_unix else "never",
        f"{forward.connections} open, {forward.connections_total} in all",
    ]


def _accounts(forward: Forward) -> str:
    return ", ".join(forward.accounts) or "every account"


def _absolute(path: str) -> str:
    """A relative path from this command's folder, as the daemon needs it (its own is not it).

    Joined, never normalised: `link/../b.sock` is beside link's target for the kernel,
    not in this folder, and a folder reached through a symlink is the daemon's to refuse.
    """
    return os.path.join(os.getcwd(), path) if path else ""  # noqa: PTH109, PTH118 - see above
