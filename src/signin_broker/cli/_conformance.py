"""`signin-broker conformance`: run the contract's sign-in cases, record the row, show the grid.

Each surface's cases run against a stub provider this command starts (I1 and I2 against
--issuer when given); nothing touches the user's own daemon, keyring or sign-in.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from signin_broker_testing.conformance import hooks, registry
from signin_broker_testing.conformance.catalog import BY_NAME
from signin_broker_testing.conformance.runner import run_surface
from signin_broker_testing.conformance.stage import CALLBACK, Target

from .._version import __version__
from ..locations import default_state_dir
from ._failures import EXIT_USAGE

MAX_PORT = 65535
MAX_HOOK_SECONDS = 600  # a hook longer than a device code lives is of no use
ADMIN_TOKEN_ENV = "SIGNIN_BROKER_CONFORMANCE_ADMIN_TOKEN"  # noqa: S105 - a name; not a flag, ps shows flags


def add_options(parser: argparse.ArgumentParser) -> None:
    """The command's flags."""
    parser.add_argument(
        "--surface",
        dest="surfaces",
        action="append",
        required=True,
        choices=[*BY_NAME, "all"],
        help="the surface to run the cases on; repeat for more, or `all` (run side by side)",
    )
    parser.add_argument(
        "--issuer",
        default="",
        metavar="URL",
        help=f"the staging provider for I1 and I2 (else they SKIP); its admin token for I2"
        f" comes from {ADMIN_TOKEN_ENV}",
    )
    _staging_options(parser)
    _registry_options(parser)


def _staging_options(parser: argparse.ArgumentParser) -> None:
    """How the cases reach the staging provider and its test user (I1, I2)."""
    given = parser.add_argument_group(
        "the staging provider (--issuer)",
        "Used by I1 and I2 only; the other cases use a stub of their own. Each command is"
        " split like a shell line but run without a shell, with each {placeholder} filled"
        " in within its argument; its stdout and stderr never reach the registry.",
    )
    given.add_argument(
        "--client-id",
        default="signin-broker",
        metavar="ID",
        help="the daemon's client id registered there (default: signin-broker)",
    )
    given.add_argument(
        "--page-port",
        type=_port,
        default=0,
        metavar="PORT",
        help="the daemon's loopback page port, for a provider that does not accept any"
        " loopback port (RFC 8252 7.3): register"
        f" http://127.0.0.1:PORT{CALLBACK} (default: a free port each time)",
    )
    given.add_argument(
        "--browser-login-command",
        default="",
        metavar="CMD",
        help="signs the test user in at {url} (the authorize request) and prints the"
        " address the provider then sends the browser to ({redirect_uri}?code=...);"
        f" also {_listed(hooks.BROWSER_LOGIN[2:])} (default: follow the redirects,"
        " for a provider that approves without asking)",
    )
    given.add_argument(
        "--approve-device-command",
        default="",
        metavar="CMD",
        help=f"approves a device code as the test user: {_listed(hooks.APPROVE_DEVICE)}"
        " (default: open {verification_uri_complete}, for a provider that approves there)",
    )
    given.add_argument(
        "--revoke-command",
        default="",
        metavar="CMD",
        help=f"revokes the test user's sessions for I2: {_listed(hooks.REVOKE)} (default:"
        f" the stub-compatible admin API with the token from {ADMIN_TOKEN_ENV})",
    )
    given.add_argument(
        "--hook-timeout",
        type=float,
        default=hooks.DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"how long each command may take (default {hooks.DEFAULT_TIMEOUT_SECONDS:g})",
    )
    given.add_argument(
        "--admin-revoke-url",
        default="",
        metavar="URL",
        help="the provider's admin revoke endpoint for I2 (default: <issuer origin>/admin/revoke)",
    )


def _registry_options(parser: argparse.ArgumentParser) -> None:
    """Where the row goes, the page, and which cases run how."""
    parser.add_argument(
        "--registry",
        type=Path,
        default=Path(default_state_dir()) / "conformance.jsonl",
        metavar="FILE",
        help="the registry (JSON lines) the row is appended to (default: in the state folder)",
    )
    parser.add_argument(
        "--html", type=Path, metavar="FILE", help="where the grid page goes (default: beside it)"
    )
    parser.add_argument("--component", default="signin-broker", help="the component's name")
    parser.add_argument("--note", default="", help="the row's note (default: version and provider)")
    parser.add_argument(
        "--case",
        dest="cases",
        action="append",
        choices=registry.CASE_IDS,
        metavar="ID",
        help="run only this case (T1-T8, I1-I3, N1-N4); repeat for more",
    )
    parser.add_argument(
        "--workers", type=int, default=4, metavar="N", help="cases run at once per surface"
    )


def _port(text: str) -> int:
    port = int(text)
    if not 1 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{text} is not a port (1 to {MAX_PORT})")
    return port


def _listed(placeholders: tuple[str, ...]) -> str:
    return ", ".join("{" + name + "}" for name in placeholders)


def _target(args: argparse.Namespace) -> Target:
    """The staging provider and its hooks; ValueError for a command that cannot be used."""
    if not 0 < args.hook_timeout <= MAX_HOOK_SECONDS:
        raise ValueError(f"--hook-timeout must be more than 0 and at most {MAX_HOOK_SECONDS}")

    def hook(option: str, line: str, allowed: tuple[str, ...]) -> hooks.Hook | None:
        return hooks.Hook.parse(option, line, allowed, args.hook_timeout) if line else None

    return Target(
        issuer=args.issuer,
        client_id=args.client_id,
        page_port=args.page_port,
        admin_token=os.environ.get(ADMIN_TOKEN_ENV, ""),
        admin_revoke_url=args.admin_revoke_url,
        browser_login=hook(
            "--browser-login-command", args.browser_login_command, hooks.BROWSER_LOGIN
        ),
        approve_device=hook(
            "--approve-device-command", args.approve_device_command, hooks.APPROVE_DEVICE
        ),
        revoke=hook("--revoke-command", args.revoke_command, hooks.REVOKE),
    )


def conformance(args: argparse.Namespace) -> int:
    """Run, append a row per surface, print the grid, write the page; 1 if a case failed.

    The cases start daemons of their own: the user's is never asked.
    """
    surfaces = list(BY_NAME) if "all" in args.surfaces else list(dict.fromkeys(args.surfaces))
    cases = args.cases or registry.CASE_IDS
    try:
        registry.read(args.registry)  # a broken registry is reported before minutes of cases
    except (registry.RegistryError, OSError) as error:
        print(f"signin-broker: the registry cannot be read: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = _target(args)
    except ValueError as error:
        print(f"signin-broker: {error}", file=sys.stderr)
        return EXIT_USAGE
    note = args.note or f"{__version__}; stub provider" + (
        f"; I1-I2 against {args.issuer}" if args.issuer else ""
    )

    def progress(surface: str, case: str, outcome: registry.Outcome, seconds: float) -> None:
        why = f": {outcome.reason}" if outcome.reason else ""
        print(f"{surface:<8} {case:<3} {outcome.status} ({seconds:.1f} s){why}", file=sys.stderr)

    def run(surface: str) -> registry.Row:
        outcomes = run_surface(BY_NAME[surface], target, cases, max(args.workers, 1), progress)
        return registry.Row.new(args.component, surface, outcomes, note)

    with ThreadPoolExecutor(max_workers=len(surfaces)) as pool:
        rows = list(pool.map(run, surfaces))
    for row in rows:
        registry.append(args.registry, row)
        print(
            row.to_json()
            if args.json
            else f"{row.date}  {row.component}  {row.surface}  {row.summary}  ({row.note})"
        )
    grid = registry.latest(registry.read(args.registry))
    if not args.json:
        print()
        print(
            registry.terminal_grid(
                grid, color=sys.stdout.isatty() and "NO_COLOR" not in os.environ
            ),
            end="",
        )
    page = args.html or args.registry.with_suffix(".html")
    page.write_text(registry.html_grid(grid), encoding="utf-8")
    print(f"registry: {args.registry}\ngrid: {page}", file=sys.stderr)
    return 1 if any(row.failed() for row in rows) else 0
