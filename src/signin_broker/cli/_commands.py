"""The subcommands: each takes the client and the parsed arguments and returns an exit status."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from ..client import (
    Account,
    AppDecision,
    BrokerClient,
    BrokerError,
    Event,
    EventKind,
    SignInStart,
    SignInState,
    SignOutResult,
    TokenRevocation,
)
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
)
from ._qr import terminal_qr, wants_colour

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
        from ._forward import print_status

        return print_json(info) if args.json else print_status(info, info.forward)
    listed: tuple[Account, ...] = ()
    with contextlib.suppress(BrokerError):  # an app whose policy lets it list no account
        listed = tuple(client.accounts())
    if args.json:
        return print_json({**jsonable(info), "accounts": jsonable(listed)})
    caller = info.caller
    default = info.default
    providers = [
        (
            f"provider {p.alias or 'main'}" + (" (default)" if p.is_default else ""),
            provider_state(p.issuer, p.degraded_reason, p.last_contact_unix),
        )
        for p in info.providers
    ]
    if len(providers) < 2:
        providers = [
            (
                "provider",
                provider_state(info.issuer, info.degraded_reason, info.last_provider_contact_unix)
                if info.issuer
                else "none configured",
            )
        ]
    several = len(info.providers) > 1
    providers += [
        ("settings" + (f" of {p.alias or 'main'}" if several else ""), by_source(p.setting_sources))
        for p in info.providers
        if p.setting_sources
    ]
    clocks = sorted({p.clock_problem for p in info.providers if p.clock_problem})
    rows = [
        *[("CLOCK", problem) for problem in clocks],
        *[("CONFIG", warning) for warning in info.config_warnings],
        (
            "daemon",
            f"running (pid {info.pid}, version {info.version},"
            f" up {duration(time.time() - info.started_at_unix)},"
            f" started by {info.started_by or 'unknown'},"
            f" {info.rss_bytes / 2**20:.0f} MB resident)",
        ),
        ("socket", info.socket_path),
        ("page", info.web_url or "-"),
        *providers,
        ("sign-in", _STATE_WORDS[info.sign_in_state]),
        ("default account", _describe(default) if default else "-"),
    ]
    if default:
        rows += [
            ("access token", f"expires {moment(default.access_token_expires_at_unix)}"),
            (
                "next renewal",
                moment(default.next_refresh_unix)
                if default.next_refresh_unix
                else "none: the provider issued no refresh token; sign in again when it expires",
            ),
            *([("AT RISK", default.at_risk)] if default.at_risk else []),
        ]
    rows += [
        (
            "ended",
            f"{'REVOKED' if ended.kind is EventKind.REVOKED else 'EXPIRED'}"
            f" {ended.account} ({ended.display_name or 'no name'})"
            f" {moment(ended.ended_at_unix)}: {ended.reason}."
            f" Sign in again: signin-broker login",
        )
        for ended in info.ended_sessions
    ]
    rows += [
        *dpop_rows(info.providers, listed),
        ("accounts", str(info.account_count)),
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


def _show_device_code(started: SignInStart) -> None:
    print(
        f"On your phone or computer, open\n\n    {started.verification_uri}\n\n"
        f"and enter the code\n\n    {started.user_code}\n\nor scan this code:\n",
        file=sys.stderr,
    )
    print(terminal_qr(started.url, colour=wants_colour(sys.stderr)), file=sys.stderr)


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


def login(client: BrokerClient, args: argparse.Namespace) -> int:
    """Begin a sign-in, send the user to the browser, and wait until the daemon reports it."""
    events = client.watch_events(timeout=args.wait)
    next(events)  # the snapshot: from here on no event can be missed
    try:
        authorize_params = _authorize_params(args)
    except ValueError as error:
        print(f"signin-broker: {error}", file=sys.stderr)
        return 2
    started = client.begin_sign_in(
        workspace_id=args.workspace,
        device=args.device,
        redirect_to=args.redirect_to,
        authorize_params=authorize_params,
        provider=args.provider,
    )
    if not _show_sign_in(started, args):
        return 1
    print("Waiting for the sign-in to complete...", file=sys.stderr)
    try:
        return _outcome(events, started.sign_in_id, args)
    except BrokerError as error:
        if error.code.name == "DEADLINE_EXCEEDED":
            print(
                f"signin-broker: sign-in did not complete within {args.wait:g} s", file=sys.stderr
            )
            return 1
        raise


def _show_sign_in(started: SignInStart, args: argparse.Namespace) -> bool:
    """Send the person where the sign-in happens; False when that failed (and why, said)."""
    if started.device:
        _show_device_code(started)
    elif args.paste:
        from ._paste import PasteError, paste_back

        try:
            paste_back(started.url)
        except PasteError as error:
            print(f"signin-broker: {error}", file=sys.stderr)
            return False
    elif args.no_browser or not _open_browser(started.url, args.browser_command):
        print(f"Open this address to sign in:\n\n    {started.url}\n", file=sys.stderr)
    else:
        print(f"Opened your browser at {started.url}", file=sys.stderr)
    return True


def _authorize_params(args: argparse.Namespace) -> dict[str, str]:
    """The authorize parameters the login options ask for (the daemon checks them)."""
    params = {
        name: value
        for name, value in (
            ("login_hint", args.login_hint),
            ("prompt", args.prompt),
            ("acr_values", args.acr_values),
            ("ui_locales", args.ui_locales),
        )
        if value
    }
    for pair in args.param:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise ValueError(f"--param takes NAME=VALUE, not {pair!r}")
        params[name] = value
    return params


def _outcome(events: Iterator[Event], sign_in_id: str, args: argparse.Namespace) -> int:
    """Wait for this sign-in's outcome among the daemon's events."""
    for event in events:
        if event.sign_in_id != sign_in_id:
            continue  # another sign-in, e.g. in a second browser tab
        if event.kind is EventKind.SIGNED_IN:
            if args.json:
                return print_json(event)
            said = event.detail[:1].upper() + event.detail[1:]  # keeps "Alice Example"
            print(f"{said} ({event.account}).", file=sys.stderr)
            return 0
        if event.kind is EventKind.SIGN_IN_FAILED:
            print(f"signin-broker: sign-in failed: {event.detail}", file=sys.stderr)
            return 1
        if event.kind is EventKind.SIGN_IN_PROGRESS and "slower" in event.detail:
            print(f"({event.detail})", file=sys.stderr)
    return 1


def _signed_out(result: SignOutResult) -> str:
    """What the provider did with the tokens, as it happened (never "revoked" by default)."""
    kept = "the tokens it issued stay valid until they expire"
    if result.revocation is TokenRevocation.REVOKED:
        return "Signed out; the provider revoked the tokens."
    if result.revocation is TokenRevocation.NOT_OFFERED:
        return f"Signed out here; the provider offers no token revocation, so {kept}."
    if result.revocation is TokenRevocation.FAILED:
        return (
            f"Signed out here; the provider did not revoke the tokens"
            f" ({result.revocation_error}), so {kept}."
        )
    return "Signed out."  # an older daemon does not say


def logout(client: BrokerClient, args: argparse.Namespace) -> int:
    """End an account's session."""
    result = client.sign_out(args.account)
    if args.json:
        return print_json(result)
    print(_signed_out(result) if result.was_signed_in else "Was not signed in.", file=sys.stderr)
    browser_command = os.environ.get("SIGNIN_BROKER_BROWSER", "")
    if args.browser and result.logout_url and not _open_browser(result.logout_url, browser_command):
        print(
            f"Open this address to sign out there too:\n\n    {result.logout_url}\n",
            file=sys.stderr,
        )
    elif result.logout_url and not args.browser:
        print(
            "`signin-broker logout --browser` also ends the provider's web session.",
            file=sys.stderr,
        )
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
    import json

    if args.json:  # the payload as an object, not a string of JSON inside JSON
        return print_json(
            [
                {
                    **{k: v for k, v in jsonable(row).items() if k != "payload_json"},
                    "payload": json.loads(row.payload_json or "{}"),
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
                        + _detail(json.loads(row.payload_json or "{}")),
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


def _open_browser(url: str, command: str = "") -> bool:
    """Open url with the given command ({url} in it, else appended), or the system's browser."""
    import shlex

    words = shlex.split(command)
    if words:
        import subprocess

        argv = [word.replace("{url}", url) for word in words]
        if not any("{url}" in word for word in words):
            argv.append(url)
        try:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603 - the user's own command, no shell
        except OSError as error:
            print(f"signin-broker: cannot run {words[0]!r}: {error.strerror}", file=sys.stderr)
            return False
        return True
    import webbrowser  # only here: it is slow to import

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False
