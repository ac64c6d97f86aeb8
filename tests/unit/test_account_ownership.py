"""An account's record has one owner, the registry: no other room can change it, only ask.

A record is frozen (an assignment fails, and mypy refuses it before that), its apps'
use a read-only mapping, and the registry's accounts are read only to others; so a room
that wants an account changed asks the registry, which replaces the record whole. These
tests fail when a record becomes writable again, or when a room other than the registry
assigns a field of one, or turns one record into another (dataclasses.replace): either
would be a room writing state it does not own. The providers' health and the sign-ins a
token request waits for have one writer each in the same way.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
from pathlib import Path

import pytest

from signin_broker.session.accounts.events import EventBus
from signin_broker.session.accounts.records import (
    Account,
    AccountInfo,
    AppUse,
    SessionHold,
    Standing,
)
from signin_broker.session.accounts.registry import AccountRegistry
from signin_broker.session.ports import NoAudit
from signin_broker.session.tokens import TokenSet

PACKAGE = Path(__file__).parents[2] / "src" / "signin_broker"
OWNER = "session/accounts/registry.py"
# The fields an Account has and its AccountInfo has not: replace() naming one makes an
# account record of another (AccountInfo's own fields make a view of its info).
ACCOUNT_ONLY = {field.name for field in dataclasses.fields(Account)} - {
    field.name for field in dataclasses.fields(AccountInfo)
}
# Whose each field is: assigned in that module only.
WRITERS = {
    **dict.fromkeys(
        ("info", "tokens", "standing", "apps", "link", "hold", "client_id", "dpop_key"), OWNER
    ),
    **dict.fromkeys(
        ("degraded_reason", "last_contact", "answer_seconds"),
        "session/fresh_tokens/provider_health.py",
    ),
}


def account() -> Account:
    tokens = TokenSet("at", "Bearer", ("openid",), 0.0, 60.0, refresh_token="rt")
    return Account(AccountInfo("user:1", "1"), tokens, apps={"app": AppUse("app", 1, 0.0, 1)})


@pytest.mark.parametrize(
    ("record", "field", "value"),
    [
        (account(), "tokens", None),
        (account(), "info", None),
        (account(), "standing", Standing(failures=9)),
        (account(), "hold", SessionHold()),
        (account().info, "is_default", True),
        (account().standing, "retry_at", 1e12),
        (account().tokens, "refresh_token", "stolen"),
        (account().apps["app"], "tokens_issued", 0),
    ],
)
def test_an_account_record_cannot_be_changed_in_place(
    record: object, field: str, value: object
) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, value)


def test_neither_an_accounts_apps_nor_the_registrys_accounts_can_be_written_by_others() -> None:
    record = account()
    with pytest.raises(TypeError):
        record.apps["other"] = AppUse("other", 2, 0.0, 1)  # type: ignore[index]
    registry = AccountRegistry(EventBus(), NoAudit(), revalidate_seconds=30)
    with pytest.raises(TypeError):
        registry.by_id["user:1"] = record  # type: ignore[index]


def test_the_registry_changes_the_session_as_it_stands_and_nothing_of_an_ended_one() -> None:
    async def scenario() -> None:
        registry = AccountRegistry(EventBus(), NoAudit(), revalidate_seconds=30)
        added, _ = await registry.add(account())
        backed_off = registry.stand(added, lambda s: dataclasses.replace(s, failures=1))
        renewed = dataclasses.replace(added.tokens, access_token="at-2")
        await registry.replace_tokens(added, renewed)  # `added` is stale: its standing is old
        now = registry.current(added)
        assert now is not None and (now.tokens, now.standing) == (renewed, backed_off)
        again, previous = await registry.add(account())  # a new sign-in: a session of its own
        assert previous is now and registry.current(added) is None
        registry.stand(added, lambda s: dataclasses.replace(s, failures=5))
        await registry.replace_tokens(added, added.tokens)
        assert registry.current(again) == again

    asyncio.run(scenario())


def sources() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
        if "_pb2" not in path.name
    }


def writes_of_others(module: str, tree: ast.Module) -> list[str]:
    """Each field this module assigns, or replaces an account's record by, that is not its own."""
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for assigned in targets:
            target = assigned
            while isinstance(target, ast.Subscript):  # record.apps[key] = ...
                target = target.value
            writer = WRITERS.get(target.attr) if isinstance(target, ast.Attribute) else None
            if writer and writer != module and not _own(target):
                found.append(f"line {node.lineno}: {ast.unparse(target)} =")
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "replace":
            named = {keyword.arg for keyword in node.keywords} & ACCOUNT_ONLY
            if named and module != OWNER:
                found.append(f"line {node.lineno}: replace(..., {', '.join(sorted(named))}=)")
    return found


def _own(target: ast.Attribute) -> bool:
    """`self.x = ...`: an object setting its own attribute, not another's record."""
    return isinstance(target.value, ast.Name) and target.value.id == "self"


def test_only_the_owner_writes_an_account_record_or_a_providers_health() -> None:
    offenders = {
        module: found
        for module, tree in sources().items()
        if (found := writes_of_others(module, tree))
    }
    assert offenders == {}


def test_the_check_sees_a_room_writing_what_it_does_not_own() -> None:
    written = (
        "account.tokens = tokens\n"
        "account.apps['x'] = use\n"
        "link.degraded_reason = ''\n"
        "changed = replace(account, standing=standing)\n"
        "view = replace(account.info, apps=())\n"  # a view of the info: no record changed
        "self.tokens = tokens\n"  # an object's own attribute
    )
    assert writes_of_others("session/fresh_tokens/renewal.py", ast.parse(written)) == [
        "line 1: account.tokens =",
        "line 2: account.apps =",
        "line 3: link.degraded_reason =",
        "line 4: replace(..., standing=)",
    ]
    assert writes_of_others(OWNER, ast.parse("changed = replace(account, tokens=t)\n")) == []


def test_the_sign_ins_a_token_request_waits_for_are_the_sign_ins_own() -> None:
    sign_ins = sources()["session/signing_in/sign_ins.py"]
    public = {
        node.attr
        for node in ast.walk(sign_ins)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and not node.attr.startswith("_")
        and isinstance(node.ctx, ast.Store)
    }
    assert public == set()
