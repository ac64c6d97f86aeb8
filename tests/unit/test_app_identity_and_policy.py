"""How apps are told apart, and the policy file's format (its use is tested in integration)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from signin_broker.daemon.apps.gate import AppGate
from signin_broker.daemon.apps.policy import (
    AppRule,
    Decision,
    PolicyError,
    PolicyFile,
    parse,
    render,
)
from signin_broker.daemon.callers.identity import INTERPRETER, Caller, script_of
from signin_broker.daemon.refusals import AppDenied, UnknownApp


@pytest.mark.parametrize(
    ("cmdline", "script"),
    [
        (["python3", "app.py", "--flag"], "/home/me/app.py"),
        (["python3", "-u", "/opt/tool/run.py"], "/opt/tool/run.py"),
        (["python3", "-X", "dev", "-W", "error", "app.py"], "/home/me/app.py"),
        (["python3", "-m", "mail.client", "x"], "-m mail.client"),
        (["python3", "-mmail.client"], "-m mail.client"),
        (["python3", "-c", "print(1)", "app.py"], ""),
        (["python3"], ""),
        (["node", "../srv/index.js"], "/home/srv/index.js"),
        (["bash", "-e", "x"], ""),
    ],
)
def test_the_script_an_interpreter_runs_is_part_of_the_app(cmdline: list[str], script: str) -> None:
    assert script_of(cmdline, "/home/me") == script


@pytest.mark.parametrize("name", ["python3", "python3.11", "pypy3", "node", "perl5.36", "bash"])
def test_interpreters_are_recognised(name: str) -> None:
    assert INTERPRETER.fullmatch(name)


@pytest.mark.parametrize("name", ["firefox", "signin-broker", "python-config", "shred"])
def test_other_programs_are_apps_by_themselves(name: str) -> None:
    assert not INTERPRETER.fullmatch(name)


def test_the_policy_file_survives_a_round_trip() -> None:
    rules = [
        AppRule("/usr/bin/mail", Decision.ALLOW, ("user:1",), ("openid", "email"), "a" * 64),
        AppRule('/usr/bin/python3 /home/me/"odd" app.py', Decision.DENY),
        AppRule("/usr/bin/tv", Decision.ASK),
        AppRule("/usr/bin/kubectl", Decision.ALLOW, id_token=True),
    ]
    assert parse(render(rules)) == {rule.app: rule for rule in rules}


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("id_token = 1", "id_token must be true or false"),
        ('id_token = "yes"', "id_token must be true or false"),
    ],
)
def test_id_token_must_be_a_boolean(line: str, said: str) -> None:
    with pytest.raises(PolicyError, match=said):
        parse(f'[[apps]]\napp = "/usr/bin/kubectl"\ndecision = "allow"\n{line}\n')


@pytest.mark.parametrize("decision", ["deny", "ask"])
def test_the_id_token_goes_only_with_allow(decision: str) -> None:
    with pytest.raises(PolicyError, match="id_token = true needs"):
        parse(f'[[apps]]\napp = "/usr/bin/kubectl"\ndecision = "{decision}"\nid_token = true\n')


def test_an_app_listed_twice_is_an_error() -> None:
    text = render([AppRule("/a", Decision.ALLOW)]) + render([AppRule("/a", Decision.DENY)])
    with pytest.raises(PolicyError, match="listed twice"):
        parse(text)


def caller(script: str, pid: int = 42) -> Caller:
    return Caller(1000, 1000, pid, "/usr/bin/python3", 1, script)


def test_ask_is_shared_by_every_waiting_request_and_answered_once(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ASK, ask_timeout=30)
    app = caller("/home/me/mail.py")

    async def scenario() -> tuple[list[object], int]:
        waiting = [asyncio.create_task(gate.admit_app(app)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert [view.waiting for view in gate.apps()] == [True]
        _, answered = await gate.decide("mail.py", Decision.ALLOW)
        assert [view.waiting for view in gate.apps()] == [False]  # before they resume
        return list(await asyncio.gather(*waiting)), answered

    entitlements, answered = asyncio.run(scenario())
    assert answered == 3 and len(entitlements) == 3
    assert not gate.apps()[0].waiting
    assert parse((tmp_path / "apps.toml").read_text())[app.app].decision is Decision.ALLOW


def test_an_unanswered_ask_times_out_and_the_next_request_asks_again(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ASK, ask_timeout=0.05)
    app = caller("/home/me/mail.py")

    async def scenario() -> None:
        with pytest.raises(AppDenied, match="did not answer"):
            await gate.admit_app(app)
        assert not gate.apps()[0].waiting

    asyncio.run(scenario())


def test_naming_an_app_by_an_ambiguous_file_name_asks_for_its_id(tmp_path: Path) -> None:
    gate = AppGate(PolicyFile(tmp_path / "apps.toml"), Decision.ALLOW, ask_timeout=1)
    for script in ("/home/me/a/run.py", "/home/me/b/run.py"):
        asyncio.run(gate.admit_app(caller(script)))  # seen
    with pytest.raises(UnknownApp, match="matches 2 apps"):
        gate.find("run.py")
    assert gate.find("/home/me/b/run.py").script == "/home/me/b/run.py"
