"""`docker-credential-signin-broker`: docker's credential helper, answering with a broker token.

docker runs it for the registries its config.json names under `credHelpers`, e.g.
`{"credHelpers": {"registry.example.com": "signin-broker"}}`, with `get`, `store`,
`erase` or `list` and the protocol of docker-credential-helpers on stdin and stdout.
A credHelpers entry carries no options, so which account, scopes, audience and user
name serve which registry is set in `$XDG_CONFIG_HOME/signin-broker/docker.toml`:

    [registries."registry.example.com"]
    account = "work/user:1234"   # default: the default account
    scopes = ["registry"]        # default: the sign-in's
    audience = ""                # RFC 8707, default none
    username = "oauth2"          # default "oauth2"

A registry that is not listed gets nothing, and docker falls back to its own store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path

from ._failures import EXIT_FAILED, EXIT_USAGE, Refused, complain
from ._json_client import fetch, read_input, renew

NOT_FOUND = "credentials not found in native keychain"  # docker's own words for "none here"
KEYS = {"account", "scopes", "audience", "username"}


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "operation", choices=("get", "store", "erase", "list"), help="docker's request"
    )


def docker_credential(args: argparse.Namespace) -> int:
    """Answer one request of docker's credential-helper protocol."""
    try:
        registries = _registries()
        given = read_input()
    except ValueError as error:
        complain(f"docker-credential: {error}")
        return EXIT_USAGE
    if args.operation == "store":
        return 0  # the broker owns the token: nothing to keep
    if args.operation == "list":
        json.dump({host: settings["username"] for host, settings in registries.items()}, sys.stdout)
        return 0
    server = given.decode("utf-8", "replace").strip()
    settings = registries.get(_host(server))
    if settings is None:
        sys.stdout.write(NOT_FOUND)
        return EXIT_FAILED
    try:
        return _answer(args, server, settings)
    except Refused as refusal:
        return refusal.status


def _answer(args: argparse.Namespace, server: str, settings: dict[str, object]) -> int:
    """The registry's token (get), or its renewal (erase: the registry refused it)."""
    args.account, args.scopes = settings["account"], settings["scopes"]
    args.audience, args.min_ttl = settings["audience"], 60
    if args.operation == "erase":  # docker sends no secret to compare: tell the daemon
        renew(args)
        return 0
    secret = fetch(args, tool="docker")["access_token"]
    json.dump({"ServerURL": server, "Username": settings["username"], "Secret": secret}, sys.stdout)
    return 0


def _registries() -> dict[str, dict[str, object]]:
    """The registries of docker.toml, each with all four settings (ValueError if malformed)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    path = config / "signin-broker" / "docker.toml"
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: {error}") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise ValueError(f"{path} nests too deeply to be read") from None
    tables = document.get("registries", {})
    if not isinstance(tables, dict) or set(document) - {"registries"}:
        raise ValueError(f'{path}: only [registries."HOST"] tables belong here')
    registries: dict[str, dict[str, object]] = {}
    for host, table in tables.items():
        if not isinstance(table, dict) or set(table) - KEYS:
            raise ValueError(f"{path}: registry {host!r} takes only {', '.join(sorted(KEYS))}")
        scopes = table.get("scopes", [])
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise ValueError(f"{path}: scopes of {host!r} must be a list of strings")
        registries[host] = {
            "account": str(table.get("account", "")),
            "scopes": scopes,
            "audience": str(table.get("audience", "")),
            "username": str(table.get("username", "oauth2")),
        }
    return registries


def _host(server: str) -> str:
    """The registry host of a server URL docker sends (`https://host/v2/`, or a bare host)."""
    return server.split("://", 1)[-1].split("/", 1)[0]
