"""Accounts by the names people know: an e-mail, a login, an alias of their own.

A real daemon and the stub provider, with Alice (who is also signed in within
workspace 7, under the same e-mail and login) and Bob. A name is read in one place
for every RPC, over gRPC and JSON alike, and only among the accounts the asking app
may use: an app allowed Alice alone, naming Bob by his e-mail, gets exactly the
NOT_FOUND "not found" of a name nobody has (docs/contract.md §11).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from signin_broker.client import AppDecision, BrokerClient, BrokerError
from signin_broker.daemon.apps.policy import AppRule, Decision
from signin_broker_testing import StubProvider, StubUser
from signin_broker_testing.daemon import DaemonProcess
from support.accounts import daemon_with_accounts, sign_in_as
from support.apps import App, rule, write_policy
from support.commands import BIN, curl_json, signin_broker

ALICE = StubUser(
    sub="1001",
    name="Alice Example",
    email="alice@example.com",
    preferred_username="alice",
    workspaces=("7",),
)
BOB = StubUser(sub="1002", name="Bob Example", email="bob@example.com", preferred_username="bob")
ALICE_ID, BOB_ID, ALICE_AT_7 = "user:1001", "user:1002", "user:1001:workspace:7"
AMBIGUOUS = (
    "'alice@example.com' names 2 accounts: user:1001, user:1001:workspace:7; name one by"
    " its id, or give it an alias (signin-broker accounts alias NAME ID)"
)


@pytest.fixture
def people() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub) as provider:
        yield provider


@pytest.fixture
def daemon(people: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    """Alice (the default), Bob, and Alice within workspace 7."""
    daemon = daemon_with_accounts(people, socket_path)
    yield daemon
    assert daemon.alive, daemon.output()
    daemon.stop()


def cli(daemon: DaemonProcess, *args: str) -> tuple[int, str, str]:
    done = signin_broker("--socket", str(daemon.socket_path), *args)
    return done.returncode, done.stdout, done.stderr


def refusal(call: object, *args: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(BrokerError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.code, caught.value.message


def test_a_token_by_e_mail_or_login_through_the_sdk_the_cli_and_json(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    app = App(tmp_path, "bobs")
    write_policy(daemon.socket_path, rule(app, "deny"))
    with BrokerClient(daemon.socket_path) as client:
        assert client.get_token("bob@example.com").account == BOB_ID
        assert client.get_token("bob@EXAMPLE.com").account == BOB_ID  # the domain: any case
        assert client.get_token("bob").account == BOB_ID  # the login (preferred_username)
        not_found = (grpc.StatusCode.NOT_FOUND, "not found")
        assert refusal(client.get_token, "Bob@example.com") == not_found  # local part: exact
        assert refusal(client.get_token, "nobody@example.com") == not_found
        (bob,) = [a for a in client.accounts() if a.id == BOB_ID]
        assert (bob.email, bob.username) == ("bob@example.com", "bob")
        # Every other place that names an account reads the name the same way.
        assert client.set_default_account("bob@example.com").id == BOB_ID
        assert {row.target_account for row in client.audit_events(account="bob")} == {BOB_ID}
        decided, _ = client.set_app_policy(app.id, AppDecision.ALLOW, accounts=["bob"])
        assert decided.accounts == (BOB_ID,)  # the policy keeps the id
    code, out, err = cli(daemon, "token", "--json", "--account", "bob@example.com")  # JSON path
    assert (code, json.loads(out)["account"]) == (0, BOB_ID), err
    status, token = curl_json(daemon.socket_path, "GetToken", '{"account": "bob"}')
    assert (status, token["account"]) == (200, BOB_ID)
    code, out, err = cli(daemon, "accounts", "--json")
    assert {a["id"]: a["username"] for a in json.loads(out)} == {
        ALICE_ID: "alice",
        ALICE_AT_7: "alice",
        BOB_ID: "bob",
    }
    code, _, err = cli(daemon, "logout", "--account", "bob@example.com")
    assert code == 0, err
    with BrokerClient(daemon.socket_path) as client:
        assert BOB_ID not in {a.id for a in client.accounts()}


def test_the_git_docker_and_kubectl_helpers_name_an_account_by_e_mail_login_or_alias(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    with BrokerClient(daemon.socket_path) as client:
        bobs = client.get_token(BOB_ID).access_token
        client.set_account_alias("b", BOB_ID)
    git = subprocess.run(
        [str(BIN / "git-credential-signin-broker"), "--socket", str(daemon.socket_path),
         "--account", "bob@example.com", "get"],
        input="protocol=https\nhost=git.example.com\n\n", capture_output=True, text=True,
        timeout=30,
    )  # fmt: skip
    assert f"password={bobs}\n" in git.stdout, git.stderr
    config = tmp_path / "tool-config" / "signin-broker"
    config.mkdir(parents=True)
    (config / "docker.toml").write_text('[registries."registry.example.com"]\naccount = "bob"\n')
    docker = subprocess.run(
        [str(BIN / "docker-credential-signin-broker"), "--socket", str(daemon.socket_path), "get"],
        input="registry.example.com", capture_output=True, text=True, timeout=30,
        env={**os.environ, "XDG_CONFIG_HOME": str(config.parent)},
    )  # fmt: skip
    assert json.loads(docker.stdout)["Secret"] == bobs, docker.stderr
    _, out, err = cli(daemon, "token", "--format", "exec-credential", "--account", "b")
    assert json.loads(out)["status"]["token"] == bobs, err


def test_a_name_of_several_accounts_says_so_and_lists_their_ids(daemon: DaemonProcess) -> None:
    with BrokerClient(daemon.socket_path) as client:
        assert refusal(client.get_token, "alice@example.com") == (
            grpc.StatusCode.INVALID_ARGUMENT,
            AMBIGUOUS,
        )
        code, message = refusal(client.remove_account, "alice")  # removal never guesses
        assert (
            code == grpc.StatusCode.INVALID_ARGUMENT
            and "user:1001, user:1001:workspace:7" in message
        )
        assert len(client.accounts()) == 3
    code, out, err = cli(daemon, "token", "--account", "alice@example.com")
    assert (code, out) == (1, "")
    assert AMBIGUOUS in err
    status, error = curl_json(daemon.socket_path, "GetToken", '{"account": "alice@example.com"}')
    assert (status, error) == (400, {"error": AMBIGUOUS, "code": "invalid_argument"})


def test_an_app_allowed_one_account_gets_for_anothers_name_the_not_found_of_nobodys_name(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    alices_app = App(tmp_path, "alices")
    write_policy(daemon.socket_path, rule(alices_app, "allow", [ALICE_ID]))
    with BrokerClient(daemon.socket_path) as owner:
        assert owner.set_account_alias("bobs", BOB_ID) == BOB_ID
    nobody = alices_app.run(daemon.socket_path, "token", "nobody@example.com")
    assert nobody == {"ok": False, "code": "NOT_FOUND", "message": "not found"}
    for bobs_name in ("bob@example.com", "bob", "bobs", BOB_ID):
        assert alices_app.run(daemon.socket_path, "token", bobs_name) == nobody, bobs_name
    # Alice's own names fit two accounts, one of which the app may not use: never a
    # candidate, so the name is not ambiguous to it, and workspace 7 is never named.
    for alices_name in ("alice@example.com", "alice"):
        got = alices_app.run(daemon.socket_path, "token", alices_name)
        assert (got["ok"], got["account"]) == (True, ALICE_ID), got
    # A write naming someone else's account, by any name, is the same refusal as for nobody's.
    for name in ("bob@example.com", "nobody@example.com", BOB_ID, "user:9999"):
        refused = alices_app.run(daemon.socket_path, "sign_out", name)
        assert refused == {
            "ok": False,
            "code": "INVALID_ARGUMENT",
            "message": f"{name} is not an account this app may act on",
        }
    with BrokerClient(daemon.socket_path) as owner:
        assert len(owner.accounts()) == 3


def test_curl_allowed_one_account_gets_the_same_404_for_anothers_e_mail_as_for_nobodys(
    daemon: DaemonProcess,
) -> None:
    curl_app = os.path.realpath(shutil.which("curl") or "/usr/bin/curl")
    write_policy(daemon.socket_path, AppRule(curl_app, Decision.ALLOW, (ALICE_ID,)))
    nobody = curl_json(daemon.socket_path, "GetToken", '{"account": "nobody@example.com"}')
    assert nobody == (404, {"error": "not found", "code": "not_found"})
    for name in ("bob@example.com", "bob", BOB_ID):
        assert curl_json(daemon.socket_path, "GetToken", json.dumps({"account": name})) == nobody
    status, token = curl_json(daemon.socket_path, "GetToken", '{"account": "alice@example.com"}')
    assert (status, token["account"]) == (200, ALICE_ID)


def test_an_alias_of_an_account_the_app_may_not_use_is_as_if_there_were_none(
    daemon: DaemonProcess, tmp_path: Path
) -> None:
    alices_app = App(tmp_path, "alices")
    write_policy(daemon.socket_path, rule(alices_app, "allow", [ALICE_ID]))
    with BrokerClient(daemon.socket_path) as owner:
        owner.set_account_alias("alice", BOB_ID, force=True)  # the person's own name wins
        assert owner.get_token("alice").account == BOB_ID
    got = alices_app.run(daemon.socket_path, "token", "alice")  # Alice's login, to her app
    assert (got["ok"], got["account"]) == (True, ALICE_ID), got
    listed = alices_app.run(daemon.socket_path, "accounts")
    assert listed["accounts"] == [ALICE_ID]
    refused = alices_app.run(daemon.socket_path, "alias", "mine", ALICE_ID)
    assert refused["code"] == "PERMISSION_DENIED", refused  # aliases are the person's


def test_an_alias_is_set_used_listed_kept_across_a_restart_and_a_sign_out(
    people: StubProvider, socket_path: Path
) -> None:
    daemon = daemon_with_accounts(people, socket_path)
    code, out, err = cli(daemon, "accounts", "alias", "work", "user:1001:workspace:7")
    assert (code, err) == (0, "work names user:1001:workspace:7.\n")
    assert cli(daemon, "accounts", "alias", "w7", "work")[0] == 0  # named by its alias
    code, out, err = cli(daemon, "token", "--json", "--account", "work")
    assert (code, json.loads(out)["account"]) == (0, ALICE_AT_7), err
    code, out, _ = cli(daemon, "accounts")
    (row,) = [line for line in out.splitlines() if ALICE_AT_7 in line]
    assert "w7, work" in row and "alice@example.com" in row
    kept = daemon.socket_path.parent / "state" / "signin-broker" / "aliases.json"
    assert json.loads(kept.read_text())["aliases"] == {"w7": ALICE_AT_7, "work": ALICE_AT_7}
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    daemon.stop()
    daemon = DaemonProcess(socket_path, "--issuer", people.issuer).start()
    with BrokerClient(daemon.socket_path) as client:
        assert client.get_token("work").account == ALICE_AT_7
        client.sign_out("work")  # a sign-out keeps the alias: the account comes back as itself
        assert refusal(client.get_token, "work")[0] == grpc.StatusCode.NOT_FOUND
    assert sign_in_as(people, daemon, ALICE.sub, "7") == ALICE_AT_7
    assert cli(daemon, "token", "--account", "work")[0] == 0

    code, _, err = cli(daemon, "accounts", "alias", "--remove", "w7")
    assert (code, err) == (0, "Removed the alias w7 of user:1001:workspace:7.\n")
    code, _, err = cli(daemon, "accounts", "alias", "--remove", "w7")
    assert code == 1 and "there is no alias 'w7'" in err
    assert cli(daemon, "accounts", "alias", "work")[0] == 2  # neither an account nor --remove
    with BrokerClient(daemon.socket_path) as client:
        (seven,) = [a for a in client.accounts() if a.id == ALICE_AT_7]
        assert seven.aliases == ("work",)
    daemon.stop()


def test_removing_an_account_removes_its_aliases_and_only_its(daemon: DaemonProcess) -> None:
    with BrokerClient(daemon.socket_path) as client:
        client.set_account_alias("work", ALICE_AT_7)
        client.set_account_alias("b", "bob@example.com")
    code, _, err = cli(daemon, "accounts", "remove", "work")
    assert code == 0, err
    kept = daemon.socket_path.parent / "state" / "signin-broker" / "aliases.json"
    assert json.loads(kept.read_text())["aliases"] == {"b": BOB_ID}
    with BrokerClient(daemon.socket_path) as client:
        assert refusal(client.get_token, "work") == (grpc.StatusCode.NOT_FOUND, "not found")
        assert client.get_token("b").account == BOB_ID


@pytest.mark.parametrize(
    "alias", ["user:1001", "work/user:1", "me@example.com", "1001", "Work", "x" * 33, ""]
)
def test_an_alias_that_could_be_taken_for_something_else_is_refused(
    daemon: DaemonProcess, alias: str
) -> None:
    with BrokerClient(daemon.socket_path) as client:
        code, message = refusal(client.set_account_alias, alias, ALICE_ID)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert "cannot be an alias: an alias is 1 to 32 lower-case letters" in message
        assert refusal(client.set_account_alias, "fine", "nobody@example.com") == (
            grpc.StatusCode.NOT_FOUND,
            "not found",
        )
        assert all(a.aliases == () for a in client.accounts())


def test_an_alias_that_is_another_accounts_login_is_refused_unless_forced(
    daemon: DaemonProcess,
) -> None:
    """An alias that is another account's login is refused: `accounts alias alice user:1002`
    once hid Alice's login without a word."""
    code, _, err = cli(daemon, "accounts", "alias", "alice", BOB_ID)
    assert code == 1 and "failed_precondition" in err, err
    assert "'alice' is the login of user:1001, user:1001:workspace:7" in err
    assert "--force" in err
    with BrokerClient(daemon.socket_path) as client:
        assert all(a.aliases == () for a in client.accounts())  # nothing changed
        assert refusal(client.set_account_alias, "bob", ALICE_ID)[0] == (
            grpc.StatusCode.FAILED_PRECONDITION
        )
        assert client.set_account_alias("bob", BOB_ID) == BOB_ID  # his own login: no harm
    code, _, err = cli(daemon, "accounts", "alias", "--force", "alice", BOB_ID)
    assert (code, err) == (0, "alice names user:1002.\n")
    code, out, err = cli(daemon, "token", "--json", "--account", "alice")
    assert (code, json.loads(out)["account"]) == (0, BOB_ID), err


def test_an_alias_given_while_the_login_was_away_is_refused_once_it_signs_in_until_chosen(
    people: StubProvider, socket_path: Path
) -> None:
    """`accounts alias bob user:1001` while Bob was removed, then Bob signed in: `--account
    bob` once gave Alice's token without a word."""
    daemon = daemon_with_accounts(people, socket_path, workspace=False)
    assert cli(daemon, "accounts", "remove", BOB_ID)[0] == 0
    assert cli(daemon, "accounts", "alias", "bob", ALICE_ID)[0] == 0  # nobody's login now
    assert sign_in_as(people, daemon, BOB.sub) == BOB_ID
    conflict = (
        f"'bob' is your alias of {ALICE_ID} and the login of {BOB_ID}, signed in since the"
        " alias was given; name the account by its id, remove the alias (signin-broker"
        " accounts alias --remove bob), or keep it over that login (signin-broker accounts"
        f" alias --force bob {ALICE_ID})"
    )
    (logged,) = daemon.expect_log(msg="an alias is the login of the account that signed in")
    assert (logged["account"], logged["reason"]) == (BOB_ID, conflict)
    code, out, err = cli(daemon, "token", "--account", "bob")
    assert (code, out) == (1, "") and conflict in err
    status, refused = curl_json(daemon.socket_path, "GetToken", '{"account": "bob"}')
    assert (status, refused) == (400, {"error": conflict, "code": "invalid_argument"})
    assert ("ALIAS", conflict) in status_rows(daemon)
    assert json.loads(cli(daemon, "status", "--json")[1])["alias_conflicts"] == [conflict]

    # Kept over the login: Alice's, across a restart; removed: Bob's login is his again.
    assert cli(daemon, "accounts", "alias", "--force", "bob", ALICE_ID)[0] == 0
    daemon.stop()
    daemon = DaemonProcess(socket_path, "--issuer", people.issuer).start()
    code, out, err = cli(daemon, "token", "--json", "--account", "bob")
    assert (code, json.loads(out or "{}").get("account")) == (0, ALICE_ID), err
    assert not [row for row in status_rows(daemon) if row[0] == "ALIAS"]
    assert cli(daemon, "accounts", "alias", "--remove", "bob")[0] == 0
    code, out, err = cli(daemon, "token", "--json", "--account", "bob")
    assert (code, json.loads(out or "{}").get("account")) == (0, BOB_ID), err
    daemon.stop()


def status_rows(daemon: DaemonProcess) -> list[tuple[str, str]]:
    """`signin-broker status` as (key, value) rows."""
    code, out, err = cli(daemon, "status")
    assert code == 0, err
    rows = (line.partition("  ") for line in out.splitlines())
    return [(key, value.strip()) for key, _, value in rows]
