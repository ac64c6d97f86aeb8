"""`signin-broker doctor`: every check of a set-up, in the order to fix them, and what to do.

The CLI never loads the daemon's code, so the checks that need the daemon's settings
(its socket folder, providers and clock, key store, state folder, app policy) run in a
child process of the daemon's code (signin_broker/daemon/doctor.py), which prints
them as JSON. When a daemon runs, the child gets that daemon's flags and environment
(read from /proc): its settings, keyring session and clock are the ones examined, not
this shell's. What only a client can see (is the daemon running, how was it started)
and the service units the CLI installed are checked here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .._version import __version__
from ..client import Account, BrokerClient, BrokerError, DaemonNotRunning, Status
from ..json_depth import within_depth
from ._bundle import write_bundle
from ._failures import EXIT_FAILED, HOW_TO_START
from ._output import duration, print_json, token_binding, token_file_state
from ._service import daemon_path, systemd_plan

OK, WARN, FAIL = "ok", "warn", "fail"
# The order of the report: the socket, the daemon, its providers and their clocks, where it
# keeps keys and state, how the service manager starts it, and the apps it serves.
ORDER = (
    "settings",
    "socket",
    "daemon",
    "provider",
    "clock",
    "tokens",
    "keyring",
    "state",
    "systemd",
    "policy",
)
CHILD_TIMEOUT_SECONDS = 60.0  # each check bounds itself; this bounds them all
DAEMON_ENTRIES = ("signin_broker.daemon.main", "signin-brokerd")
IS_ENABLED = ["systemctl", "--user", "is-enabled", "signin-broker.socket"]


def finding(check: str, name: str, status: str, seen: str, action: str = "") -> dict[str, str]:
    """One finding, as the daemon's side writes them too."""
    return {"check": check, "name": name, "status": status, "seen": seen, "action": action}


def doctor(client: BrokerClient, args: argparse.Namespace) -> int:
    """Run every check; print them (or JSON); write the support bundle if asked; 1 if any failed."""
    status, daemon = _daemon(client)
    flags, environ = _daemon_command(status) if status else (None, None)
    unknown = [_settings_not_the_daemons(status)] if status and flags is None else []
    if flags is None:  # no daemon to copy: the settings a daemon started here would take
        flags = [*(["--config", str(args.config)] if args.config else [])]
        flags += ["--socket", args.socket] if args.socket else []
    examined = _examine(["--forget-dpop", *flags] if args.forget_dpop else flags, environ)
    findings = sorted(
        [
            daemon,
            *unknown,
            *examined.get("findings", []),
            *_tokens(client, status),
            *_systemd_units(),
        ],
        key=lambda f: ORDER.index(f["check"]),
    )
    if args.bundle:
        write_bundle(Path(args.bundle), findings, examined.get("settings"), status)
    failed = any(f["status"] == FAIL for f in findings)
    if args.json:
        print_json({"ok": not failed, "findings": findings})
    else:
        print(_report(findings))
        if args.bundle:
            print(f"\nsupport bundle written to {args.bundle}: read it before you send it")
    return EXIT_FAILED if failed else 0


def _daemon(client: BrokerClient) -> tuple[Status | None, dict[str, str]]:
    """Whether the daemon answers, and how it was started."""
    try:
        status = client.status()
    except DaemonNotRunning as error:
        return None, finding(
            "daemon",
            "daemon",
            FAIL,
            f"not running: nothing serves {error.socket_path}",
            HOW_TO_START,
        )
    except BrokerError as error:
        return None, finding(
            "daemon", "daemon", FAIL, f"it did not answer as it should: {error.message}",
            "restart it (`systemctl --user restart signin-broker.service`, or stop and start"
            " signin-brokerd); its log says more",
        )  # fmt: skip
    seen = (
        f"running: pid {status.pid}, version {status.version}, started by {status.started_by},"
        f" up {duration(time.time() - status.started_at_unix)}"
    )
    if status.version != __version__:
        return status, finding(
            "daemon", "daemon", WARN, f"{seen}; this command is version {__version__}",
            "restart the daemon to run the installed version",
        )  # fmt: skip
    return status, finding("daemon", "daemon", OK, seen)


def _tokens(client: BrokerClient, status: Status | None) -> list[dict[str, str]]:
    """How each account's tokens are sent (Bearer or DPoP-bound) and why: the running daemon's.

    And whether each service account is granted its token, and each token file written.
    """
    if status is None:
        return []
    try:
        listed = client.accounts()
    except BrokerError:  # an app whose policy lets it list no account
        listed = []
    files = [
        finding("tokens", f"token file {file.name}", FAIL if file.problem else OK,
                token_file_state(file))
        for file in status.token_files
    ]  # fmt: skip
    return [*map(_account_tokens, listed), *files]


def _account_tokens(account: Account) -> dict[str, str]:
    """How an account's tokens are sent; for a service account, whether the provider grants them."""
    name, seen = f"tokens ({account.id})", token_binding(account.dpop_bound_by)
    if not account.service_account:
        return finding("tokens", name, OK, seen)
    if account.at_risk:  # why the provider refuses the client credentials grant
        return finding("tokens", name, FAIL, account.at_risk)
    return finding("tokens", name, OK, f"{seen}; a service account (client credentials grant)")


def _daemon_command(status: Status) -> tuple[list[str] | None, dict[str, str] | None]:
    """The running daemon's flags and environment, where the system shows them (Linux's /proc)."""
    process = Path("/proc") / str(status.pid)
    try:
        argv = (process / "cmdline").read_bytes().decode().split("\0")[:-1]
        environ = (process / "environ").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return None, None
    entry = next((i for i, a in enumerate(argv) if a.endswith(DAEMON_ENTRIES)), None)
    if entry is None:  # not started in a way this knows: this shell's settings, then
        return None, None
    return argv[entry + 1 :], dict(v.split("=", 1) for v in environ if "=" in v)


def _settings_not_the_daemons(status: Status) -> dict[str, str]:
    """Said when the running daemon's flags and environment could not be read."""
    return finding(
        "settings",
        "running daemon's settings",
        WARN,
        f"the running daemon (pid {status.pid}) was not started as signin-brokerd or"
        " `python -m signin_broker.daemon.main`, or its /proc cannot be read: the settings"
        " examined are those a daemon started from this shell would take",
        "start the daemon as the service does (signin-brokerd), or run the doctor with the"
        " same flags (--config, --socket) and environment as the daemon",
    )


def _examine(flags: list[str], environ: dict[str, str] | None) -> dict[str, Any]:
    """The daemon's side of the checks, from a child process of the daemon's code.

    `flags`: the daemon's, after --forget-dpop when the person asked for that.
    """
    command = [sys.executable, "-m", "signin_broker.daemon.doctor", *flags]
    try:
        done = subprocess.run(  # noqa: S603 - our own module, no shell
            command, env=environ, capture_output=True, text=True, timeout=CHILD_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        examined: dict[str, Any] = json.loads(within_depth(done.stdout))
    except (subprocess.TimeoutExpired, ValueError) as error:
        why = (
            f"took over {CHILD_TIMEOUT_SECONDS:g} s"
            if isinstance(error, subprocess.TimeoutExpired)
            else (done.stderr.strip().splitlines() or ["it printed nothing"])[-1]
        )
        return {
            "findings": [
                finding(
                    "settings", "settings", FAIL, f"the daemon's checks could not run: {why}",
                    "run `signin-brokerd` in the foreground with the same settings to see why",
                )
            ]
        }  # fmt: skip
    return examined


def _systemd_units() -> list[dict[str, str]]:
    """The user units `install-service` writes: none, or all of them as shipped, and enabled."""
    if not sys.platform.startswith("linux"):
        return []
    plan = systemd_plan(daemon_path(), dict(os.environ))
    installed = {path: path.read_text() for path in plan.files if path.exists()}
    name = "systemd units"
    if not installed:
        return [
            finding(
                "systemd", name, OK,
                "not installed: the daemon runs when you start it",
                "`signin-broker install-service` makes the first app that asks start it",
            )
        ]  # fmt: skip
    stale = [str(p) for p, text in plan.files.items() if installed.get(p) != text]
    if stale:
        return [
            finding(
                "systemd", name, WARN,
                f"{', '.join(stale)} missing or not as this installation ships it"
                " (another signin-brokerd, or an older version)",
                "run `signin-broker install-service` again to rewrite them",
            )
        ]  # fmt: skip
    try:
        asked = subprocess.run(  # noqa: S603 - a fixed command, no shell
            IS_ENABLED, capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        return [finding("systemd", name, WARN, f"installed; systemctl cannot be asked: {error}")]
    state = (asked.stdout.strip() or asked.stderr.strip() or "unknown").splitlines()[0]
    if asked.returncode != 0:
        return [
            finding(
                "systemd", name, WARN, f"installed; signin-broker.socket is {state}",
                "systemctl --user enable --now signin-broker.socket",
            )
        ]  # fmt: skip
    return [finding("systemd", name, OK, f"installed as shipped; signin-broker.socket is {state}")]


def _report(findings: list[dict[str, str]]) -> str:
    """One line per finding, and under each that is not ok what to do."""
    width = max(len(f["name"]) for f in findings) + 2
    lines = []
    for f in findings:
        lines.append(
            f"{f['status'].upper() if f['status'] != OK else OK:<6}{f['name']:<{width}}{f['seen']}"
        )
        if f["status"] != OK and f["action"]:
            lines.append(f"{'':<6}{'':<{width}}to do: {f['action']}")
    failed = sum(f["status"] == FAIL for f in findings)
    warned = sum(f["status"] == WARN for f in findings)
    lines.append(
        f"\n{failed} failed, {warned} to look at" if failed or warned else "\nall checks passed"
    )
    return "\n".join(lines)
