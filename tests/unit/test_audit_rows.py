"""What an audit row says is decided in one place (session.audit_entries): no other module does."""

from __future__ import annotations

import re
from pathlib import Path

from signin_broker.session import audit_entries
from signin_broker.session.audit_entries import Action, Actor
from signin_broker.store.audit_rows import ACTIONS

PACKAGE = Path(__file__).parents[2] / "src" / "signin_broker"
HOMES = {"session/audit_entries.py"}  # the type and its builders
ACTOR = Actor(app="/usr/bin/app", uid=1000, pid=42)


def test_only_audit_entries_builds_audit_entries() -> None:
    builders = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if re.search(r"\bAuditEntry\(", path.read_text())
        and str(path.relative_to(PACKAGE)) not in HOMES
    )
    assert builders == []


def test_a_reset_app_decision_is_a_deletion_and_a_kept_one_an_update() -> None:
    kept = audit_entries.app_decided(ACTOR, "app:1", "allow", ["user:1"], kept=True, id_token=True)
    reset = audit_entries.app_decided(ACTOR, "app:1", "default", [], kept=False, id_token=False)
    assert (kept.action, kept.payload["with"]) == (Action.UPDATE, "ID token")
    assert reset.action is Action.DELETE and "with" not in reset.payload


def test_a_token_row_names_the_grant_only_in_memory() -> None:
    row = audit_entries.token_issued(
        ACTOR, "user:1", ("openid",), 1700000000, audience="", id_token=False, grant="k"
    )
    assert row.repeat_of == "k" and "k" not in str(row.payload)
    assert audit_entries.signed_in(ACTOR, "user:1", ("openid",), again=True).action is Action.UPDATE


def test_every_action_the_session_says_is_one_the_log_keeps() -> None:
    assert {str(action) for action in Action} == set(ACTIONS)
