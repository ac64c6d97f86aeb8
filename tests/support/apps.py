"""Separate app processes for tests: each script file is an app of its own to the daemon.

The daemon tells apps apart by executable and, for an interpreter, the script it
runs, so copies of one small script at different paths are different apps, as two
Python desktop apps would be.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from signin_broker.daemon.apps.policy import AppRule, Decision, render

APP_SOURCE = '''\
"""A test app: one broker call, its outcome as JSON on stdout."""
import json
import sys

from signin_broker.client import AppDecision, BrokerClient, BrokerError

socket_path, action, *rest = sys.argv[1:]
with BrokerClient(socket_path, timeout=120) as broker:
    try:
        if action == "token":
            token = broker.get_token(rest[0] if rest else "", scopes=rest[1:])
            result = {"account": token.account, "scopes": list(token.scopes),
                      "access_token": token.access_token}
        elif action == "dpop":  # account, method, URL
            proof = broker.sign_dpop_proof(rest[1], rest[2], rest[0])
            result = {"account": proof.account, "token_type": proof.token_type,
                      "dpop": proof.dpop, "access_token": proof.access_token}
        elif action == "step_up":  # account, acr_values
            token = broker.get_token(rest[0], acr_values=rest[1])
            result = {"account": token.account, "acr": token.acr}
        elif action == "accounts":
            result = {"accounts": [account.id for account in broker.accounts()]}
        elif action == "status":
            status = broker.status()
            result = {"default": status.default_account, "count": status.account_count}
        elif action == "state":
            status = broker.status()
            result = {"state": status.sign_in_state.name, "count": status.account_count}
        elif action == "sign_out":
            result = {"was_signed_in": broker.sign_out(rest[0]).was_signed_in}
        elif action == "remove":
            result = {"logout_url": broker.remove_account(rest[0])[0]}
        elif action == "use":
            result = {"default": broker.set_default_account(rest[0]).id}
        elif action == "device":
            started = broker.begin_sign_in(device=True, account=rest[0] if rest else "")
            result = {"sign_in_id": started.sign_in_id, "user_code": started.user_code}
        elif action == "begin":  # rest[0]: "device" or "browser"; rest[1]: the account
            begun = broker.begin_sign_in(device=rest[0] == "device", account="".join(rest[1:]))
            result = {"sign_in_id": begun.sign_in_id, "url": begun.url}
        elif action == "qr":
            media_type, image = broker.sign_in_qr(rest[0])
            result = {"media_type": media_type, "size": len(image)}
        elif action == "audit":
            account = rest[0] if rest else ""
            result = {"rows": [row.as_dict() for row in broker.audit_events(account=account)]}
        elif action == "apps":
            result = {"apps": [app.id for app in broker.apps().apps]}
        elif action == "set_policy":  # app, decision name, then accounts
            decision = AppDecision[rest[1].upper()]
            result = {"decided": broker.set_app_policy(rest[0], decision, accounts=rest[2:])[0].id}
        elif action == "alias":  # alias, then the account it names ("" removes it)
            result = {"account": broker.set_account_alias(rest[0], rest[1] if rest[1:] else "")}
        elif action == "answer_once":  # app, decision name
            decision = AppDecision[rest[1].upper()]
            answered = broker.set_app_policy(rest[0], decision, once=True)[1]
            result = {"answered": answered}
        elif action == "watch":  # for rest[0] s, or until an event of kind rest[1] (of rest[2])
            seconds, until, events = float(rest[0]), rest[1:], []
            try:
                for event in broker.watch_events(timeout=seconds):
                    if event.kind.name == "SNAPSHOT":
                        print("watching", file=sys.stderr, flush=True)
                        continue
                    seen = [event.kind.name, event.account]
                    events.append(dict(zip(("kind", "account"), seen),
                                       detail=event.detail, sign_in_id=event.sign_in_id))
                    if until and seen[:len(until)] == until:
                        break
            except BrokerError as error:
                if error.code.name != "DEADLINE_EXCEEDED":
                    raise
            result = {"events": events}
        else:
            raise SystemExit(f"unknown action {action}")
        result["ok"] = True
    except BrokerError as error:
        result = {"ok": False, "code": error.code.name, "message": error.message}
print(json.dumps(result))
'''


class App:
    """A test app at its own path; `run` makes one call to the daemon and returns the outcome."""

    def __init__(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{name}-app.py"  # not importable: never shadows a module
        self.path.write_text(APP_SOURCE)
        self.name = self.path.name

    @property
    def id(self) -> str:
        """The app's identity as the daemon sees it: the interpreter's file, then the script."""
        return f"{os.path.realpath(sys.executable)} {self.path}"

    def start(self, socket_path: Path, action: str, *args: str) -> subprocess.Popen[str]:
        """Begin a call in the background (e.g. one that waits for the user's answer)."""
        return subprocess.Popen(
            [sys.executable, str(self.path), str(socket_path), action, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def run(self, socket_path: Path, action: str, *args: str) -> dict[str, Any]:
        """Make the call and return its outcome: {"ok": True, ...} or the error's code."""
        return outcome(self.start(socket_path, action, *args))


def outcome(process: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    """The JSON an app printed when it finished."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def policy_path(daemon_socket: Path) -> Path:
    """The app policy file of a test daemon (support.daemon puts its config beside the socket)."""
    return daemon_socket.parent / "config" / "signin-broker" / "apps.toml"


def write_policy(daemon_socket: Path, *rules: AppRule) -> None:
    """Write the daemon's policy file as the user would edit it."""
    path = policy_path(daemon_socket)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(rules))


def rule(
    app: App, decision: str, accounts: Sequence[str] = (), scopes: Sequence[str] = ()
) -> AppRule:
    """A policy entry for a test app."""
    return AppRule(app.id, Decision(decision), tuple(accounts), tuple(scopes))
