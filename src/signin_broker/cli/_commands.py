"""What the daemon is doing and the person's decisions: status, accounts, apps, the audit.

Each command takes the client and the parsed arguments and returns an exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any

from ..client import (
    Account,
    AppDecision,
    BrokerClient,
    BrokerError,
    EventKind,
    SignInState,
    Status,
)
from ..json_depth import within_depth
from ._forward import print_status
from ._output import (
    accounts_table,
    by_source,
    dpop_rows,
    duration,
    jsonable,
    key_values,
    moment,
    print_json,
    provider_state,
    remark,
    shortened,
    table,
    token_file_state,
)

_STATE_WORDS = {
    SignInState.NOT_CONFIGURED: "not configured (no issuer set)",
    SignInState.SIGNED_OUT: "signed out",
    SignInState.SIGNED_IN: "signed in",
    SignInState.UNSPECIFIED: "unknown",
}


def status(client: BrokerClient, args: argparse.Namespace) -> int:
    """Print whether the daemon runs, where, who is signed in and how their tokens go."""
    info = client.status()
    if info.forward is not None:  # asked through a forward: nothing of the host to show
        return print_json(info) if args.json else print_status(info, info.forward)
    listed: tuple[Account, ...] = ()
    with contextlib.suppress(BrokerError):  # an app whose policy lets it list no account
        listed = tuple(client.accounts())
    if args.json:
        return print_json({**jsonable(info), "accounts": jsonable(listed)})
    clocks = sorted({p.clock_problem for p in info.providers if p.clock_problem})
    caller = info.caller
    rows = [
        *[("CLOCK", problem) for problem in clocks],
        *[("CONFIG", warning) for warning in info.config_warnings],
        *[("ALIAS", conflict) for conflict in info.alias_conflicts],
        (
            "daemon",
            f"running (pid {info.pid}, version {info.version},"
            f" up {duration(time.time() - info.started_at_unix)},"
            f" started by {info.started_by or 'unknown'},"
            f" {info.rss_bytes / 2**20:.0f} MB resident)",
        ),
        ("socket", info.socket_path),
        ("page", info.web_url or "-"),
        *_provider_rows(info),
        ("sign-in", _STATE_WORDS[info.sign_in_state]),
        *_default_rows(info.default),
        *_ended_rows(info),
        *dpop_rows(info.providers, listed),
        ("accounts", str(info.account_count)),
        *[(f"token file {file.name}", token_file_state(file)) for file in info.token_files],
        (
            "storage",
            f"DEGRADED: {info.storage_problem}" if info.storage_problem else info.storage or "-",
        ),
        (
            "audit",
            "DEGRADED: " + info.audit_degraded_reason if info.audit_degraded_reason else "ok",
        ),
        ("you", f"uid {caller.uid}, pid {caller.pid}, {caller.executable or 'unknown program'}"),
    ]
    print(key_values(rows))
    return 0


def _provider_rows(info: Status) -> list[tuple[str, str]]:
    """Each provider and how it answers, and where its settings came from."""
    rows = [
        (
            f"provider {p.alias or 'main'}" + (" (default)" if p.is_default else ""),
            provider_state(p.issuer, p.degraded_reason, p.last_contact_unix),
        )
        for p in info.providers
    ]
    if len(rows) < 2:
        rows = [
            (
                "provider",
                provider_state(info.issuer, info.degraded_reason, info.last_provider_contact_unix)
                if info.issuer
                else "none configured",
            )
        ]
    several = len(info.providers) > 1
    return rows + [
        ("settings" + (f" of {p.alias or 'main'}" if several else ""), by_source(p.setting_sources))
        for p in info.providers
        if p.setting_sources
    ]


def _default_rows(default: Account | None) -> list[tuple[str, str]]:
    """The default account, its token's expiry and next renewal, and what puts it at risk."""
    if default is None:
        return [("default account", "-")]
    return [
        ("default account", _describe(default)),
        ("access token", f"expires {moment(default.access_token_expires_at_unix)}"),
        (
            "next renewal",
            moment(default.next_refresh_unix)
            if default.next_refresh_unix
            else "none: the provider issued no refresh token; sign in again when it expires",
        ),
        *([("AT RISK", default.at_risk)] if default.at_risk else []),
    ]


def _ended_rows(info: Status) -> list[tuple[str, str]]:
    """The sessions that ended by themselves, and how to come back."""
    return [
        (
            "ended",
            f"{'REVOKED' if ended.kind is EventKind.REVOKED else 'EXPIRED'}"
            f" {ended.account} ({ended.display_name or 'no name'})"
            f" {moment(ended.ended_at_unix)}: {ended.reason}."
            f" Sign in again: signin-broker login",
        )
        for ended in info.ended_sessions
    ]


def _describe(account: Account) -> str:
    name = account.display_name or account.email
    return f"{account.id} ({name})" if name else account.id


def accounts(client: BrokerClient, args: argparse.Namespace) -> int:
    """List the signed-in accounts, or make one the default, or remove one."""
    if args.action != "list":
        change = {"use": _use_account, "remove": _remove_account, "alias": _alias}[args.action]
        return change(client, args)
    listed = client.accounts()
    if args.json:
        return print_json(listed)
    if not listed:
        print("no accounts signed in; run `signin-broker login`", file=sys.stderr)
        return 0
    print(accounts_table(listed))
    return 0


def _use_account(client: BrokerClient, args: argparse.Namespace) -> int:
    chosen = client.set_default_account(args.account)
    if args.json:
        return print_json(chosen)
    print(f"{_describe(chosen)} is now the default account.", file=sys.stderr)
    return 0


def _remove_account(client: BrokerClient, args: argparse.Namespace) -> int:
    logout_url, purge_at = client.remove_account(args.account)
    if args.json:
        return print_json({"logout_url": logout_url, "audit_purge_at_unix": purge_at})
    print(
        f"Removed {args.account}: signed out, its stored state, key and aliases deleted;"
        f" its audit rows go {moment(purge_at)}.",
        file=sys.stderr,
    )
    return 0


def _alias(client: BrokerClient, args: argparse.Namespace) -> int:
    if args.remove == bool(args.account):
        print("accounts alias: give NAME and its account, or --remove NAME", file=sys.stderr)
        return 2
    named = client.set_account_alias(args.name, args.account, force=args.force)
    if args.json:
        return print_json({"alias": args.name, "account": named, "removed": args.remove})
    done = f"Removed the alias {args.name} of" if args.remove else f"{args.name} names"
    print(f"{done} {named}.", file=sys.stderr)
    return 0


def apps(client: BrokerClient, args: argparse.Namespace) -> int:
    """List the apps and decisions, or record a decision for one."""
    if args.action != "list":
        decision = AppDecision.UNSPECIFIED if args.action == "reset" else AppDecision(args.action)
        app, answered = client.set_app_policy(
            args.app,
            decision,
            accounts=getattr(args, "accounts", ()),
            scopes=getattr(args, "scopes", ()),
            pin=getattr(args, "pin", False),
            id_token=getattr(args, "id_token", False),
            once=getattr(args, "once", False),
            origins=getattr(args, "origins", ()),
        )
        if args.json:
            return print_json(app)
        said = f"{app.id}: {app.decision.value}" + ("" if app.decided else " (the default)")
        if getattr(args, "once", False):
            said = f"{app.id}: {args.action} this once"
        if answered:
            said += f"; answered its waiting request{'s' if answered > 1 else ''}"
        print(said, file=sys.stderr)
        return 0
    listed = client.apps()
    if args.json:
        return print_json(listed)
    if listed.policy_error:
        print(
            f"signin-broker: the policy file has a problem: {listed.policy_error}", file=sys.stderr
        )
    rows = [
        [
            app.id,
            app.decision.value
            + ("" if app.decided else "*")
            + (" (WAITING)" if app.waiting else ""),
            ", ".join(app.accounts) or "all",
            " ".join(app.scopes) or "all",
            moment(app.last_used_unix),
            str(app.tokens_issued),
        ]
        for app in listed.apps
    ]
    print(table(["APP", "DECISION", "ACCOUNTS", "SCOPES", "LAST USED", "TOKENS"], rows))
    remark(
        f"* the default for new apps ({listed.default_decision.value});"
        f" policy file: {listed.policy_file}"
    )
    return 0


def audit(client: BrokerClient, args: argparse.Namespace) -> int:
    """Show recent audit rows."""
    rows = client.audit_events(
        account=args.account, app=args.app, limit=args.limit, before_id=args.before
    )
    if args.json:  # the payload as an object, not a string of JSON inside JSON
        return print_json(
            [
                {
                    **{k: v for k, v in jsonable(row).items() if k != "payload_json"},
                    "payload": json.loads(within_depth(row.payload_json or "{}")),
                }
                for row in rows
            ]
        )
    print(
        table(
            ["ID", "TIME", "APP", "ACCOUNT", "ACTION", "RESOURCE", "DETAIL"],
            [
                [
                    str(row.id),
                    time.strftime("%m-%d %H:%M:%S", time.localtime(row.created_unix)),
                    shortened(row.actor_app, 22, keep="end"),
                    row.target_account or "-",
                    row.action,
                    shortened(
                        row.resource + (f" {row.resource_id}" if row.resource_id else ""), 24
                    ),
                    shortened(
                        (f"{row.times}x, " if row.times > 1 else "")
                        + _detail(json.loads(within_depth(row.payload_json or "{}"))),
                        34,
                    ),
                ]
                for row in rows
            ],
        )
    )
    return 0


def _detail(payload: dict[str, Any]) -> str:
    """A row's payload as short `name=value` words, for a line a person reads."""
    return " ".join(
        f"{name}={','.join(map(str, value)) if isinstance(value, list) else value}"
        for name, value in payload.items()
        if value not in ("", None, [])
    )
