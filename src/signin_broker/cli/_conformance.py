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

from .._version import __version__
from ..client import BrokerClient
from ..conformance import registry
from ..conformance.runner import run_surface
from ..conformance.stage import Target
from ..conformance.surfaces import BY_NAME
from ..locations import default_state_dir

EXIT_USAGE = 2
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
    parser.add_argument(
        "--client-id", default="signin-broker", metavar="ID", help="this component's client id"
    )
    parser.add_argument(
        "--admin-revoke-url",
        default="",
        metavar="URL",
        help="the provider's admin revoke endpoint for I2 (default: <issuer origin>/admin/revoke)",
    )
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


def conformance(client: BrokerClient, args: argparse.Namespace) -> int:
    """Run, append a row per surface, print the grid, write the page; 1 if a case failed."""
    del client  # the cases start daemons of their own
    surfaces = list(BY_NAME) if "all" in args.surfaces else list(dict.fromkeys(args.surfaces))
    cases = args.cases or registry.CASE_IDS
    try:
        registry.read(args.registry)  # a broken registry is reported before minutes of cases
    except (registry.RegistryError, OSError) as error:
        print(f"signin-broker: the registry cannot be read: {error}", file=sys.stderr)
        return EXIT_USAGE
    target = Target(
        issuer=args.issuer,
        client_id=args.client_id,
        admin_token=os.environ.get(ADMIN_TOKEN_ENV, ""),
        admin_revoke_url=args.admin_revoke_url,
    )
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
