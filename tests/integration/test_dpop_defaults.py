"""DPoP only where it is asked for or required: Bearer tokens on the defaults, against the stub.

A provider that merely offers DPoP gets Bearer tokens, which every tool can send. A
client the provider requires DPoP of (the stub's `dpop_bound_access_tokens`, whose
refusal, naming DPoP, spends the code or an approved device code, harsher than panva's
oidc-provider) is signed in all the same, with at most one more pass through the
provider's page and never a second code to enter; what was learned is kept in the
state folder with when and why, so the next sign-in proves from its first request,
until the doctor forgets it. A refusal that does not name DPoP, with a proof and
without, teaches nothing: a made-up code gets that too. `dpop = "off"` says
which setting stands in the way; a managed config can ask for DPoP; an account bound
under the old default keeps working.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest

from signin_broker.client import BrokerClient, EventKind
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.models import DEFAULT_CLIENT
from support.commands import signin_broker
from support.events import watching
from support.signin import sign_in, signed_in_daemon

MUST_PROVE = replace(DEFAULT_CLIENT, dpop_bound_access_tokens=True)  # names DPoP as it refuses
NAMED = "the provider refused a request without a DPoP proof, naming DPoP (invalid_dpop_proof)"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
GIT_INPUT = "protocol=https\nhost=git.example.com\n\n"


def learned_file(daemon: DaemonProcess) -> Path:
    return daemon.socket_path.parent / "state" / "signin-broker" / "dpop-required.json"


def userinfo(stub: StubProvider, headers: dict[str, str]) -> int:
    return httpx2.get(stub.base_url + stub.paths.userinfo, headers=headers).status_code


def authorize_requests(stub: StubProvider) -> list[dict[str, str]]:
    return [r.params for r in stub.requests if r.path == stub.paths.authorize]


def test_a_provider_that_offers_dpop_gets_bearer_tokens_every_tool_can_send(
    socket_path: Path,
) -> None:
    with StubProvider(dpop=True) as stub:
        daemon = signed_in_daemon(stub, socket_path)
        socket = ("--socket", str(socket_path))
        with BrokerClient(socket_path) as broker:
            token = broker.get_token()
            status = broker.status()
        header = signin_broker(*socket, "token", "--format", "header")
        git = signin_broker(*socket, "git-credential", "get", input_text=GIT_INPUT)
        assert (token.token_type, token.dpop_bound_by) == ("Bearer", "")
        assert [(p.dpop, p.dpop_required) for p in status.providers] == [("if-required", False)]
        assert status.default is not None and status.default.dpop_bound_by == ""
        assert "dpop_jkt" not in authorize_requests(stub)[-1]
        assert not stub.token_requests("authorization_code")[-1].headers.get("dpop")
        assert userinfo(stub, {"Authorization": f"Bearer {token.access_token}"}) == 200
        assert header.returncode == 0
        assert header.stdout.strip() == f"Authorization: Bearer {token.access_token}"
        assert git.returncode == 0 and f"password={token.access_token}" in git.stdout
        assert not learned_file(daemon).exists()
        daemon.stop()


@pytest.mark.usefixtures("execd_daemons")
def test_a_client_that_must_prove_signs_in_with_one_more_pass_and_the_next_proves_at_once(
    socket_path: Path,
) -> None:
    with StubProvider(clients=[MUST_PROVE], dpop=True) as stub:
        daemon = signed_in_daemon(stub, socket_path)
        # The code without a proof: refused and spent; with one: refused (spent); a new
        # authorization bound to the key (dpop_jkt), its code redeemed with a proof.
        exchanges = stub.token_requests("authorization_code")
        assert [bool(e.headers.get("dpop")) for e in exchanges] == [False, True, True]
        first, again = authorize_requests(stub)
        assert "dpop_jkt" not in first and again["dpop_jkt"]
        socket = ("--socket", str(socket_path))
        with BrokerClient(socket_path) as broker:
            token = broker.get_token()
            proof = broker.sign_dpop_proof("GET", stub.base_url + stub.paths.userinfo)
        assert (token.token_type, token.dpop_bound_by) == ("DPoP", "provider")
        assert userinfo(stub, proof.headers) == 200
        assert userinfo(stub, {"Authorization": f"Bearer {token.access_token}"}) == 401
        status = signin_broker(*socket, "status")
        assert "if-required; the provider requires DPoP of this client" in status.stdout
        assert "DPoP-bound: the identity provider requires DPoP" in status.stdout
        as_json = json.loads(signin_broker(*socket, "status", "--json").stdout)
        assert [a["dpop_bound_by"] for a in as_json["accounts"]] == ["provider"]
        assert as_json["providers"][0]["dpop_required"] is True
        doctor = json.loads(signin_broker(*socket, "doctor", "--json", env=daemon.env).stdout)
        said = {f["name"]: f["seen"] for f in doctor["findings"]}
        assert "requires DPoP of this client" in said["tokens (user:1001)"]
        assert (
            "it requires DPoP of client signin-broker, as a sign-in learned on"
            in said["provider main"]
        )
        assert NAMED in said["provider main"]
        refused = signin_broker(*socket, "token", "--format", "exec-credential")
        assert refused.returncode == 1 and "provider requires DPoP" in refused.stderr
        (kept,) = json.loads(learned_file(daemon).read_text())["required"]
        assert (kept["issuer"], kept["client_id"], kept["reason"]) == (
            stub.issuer, "signin-broker", NAMED,
        )  # fmt: skip
        assert abs(kept["learned_at"] - time.time()) < 60
        daemon.stop()
        stub.clear_requests()
        restarted = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
        with Browser() as browser:
            assert sign_in(browser, restarted).status_code == 303
        (authorize,) = authorize_requests(stub)  # straight to DPoP: no refusal, no second pass
        assert authorize["dpop_jkt"]
        assert [bool(e.headers.get("dpop")) for e in stub.token_requests()] == [True]
        forgot = signin_broker(*socket, "doctor", "--forget-dpop", env=restarted.env)
        assert f"forgotten: {stub.issuer} of client signin-broker" in forgot.stdout, forgot.stdout
        assert not learned_file(restarted).exists()
        with BrokerClient(socket_path) as broker:  # its account stays bound, the rule is gone
            assert [p.dpop_required for p in broker.status().providers] == [False]
            assert broker.get_token().token_type == "DPoP"
        restarted.stop()


@pytest.mark.usefixtures("execd_daemons")  # the doctor reads the daemon's flags in /proc
def test_a_provider_that_refuses_a_code_both_ways_without_naming_dpop_teaches_nothing(
    socket_path: Path,
) -> None:
    """A plain invalid_grant with a proof and without is what a made-up code gets too."""
    silent = replace(MUST_PROVE, dpop_refusal="invalid_grant")
    with (
        StubProvider(clients=[silent], dpop=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
        Browser() as browser,
    ):
        page = sign_in(browser, daemon)
        assert page.status_code == 200 and "Sign-in failed" in page.text, page.text
        assert len(authorize_requests(stub)) == 1  # not begun again
        exchanges = stub.token_requests("authorization_code")
        assert [bool(e.headers.get("dpop")) for e in exchanges] == [False, True]
        assert not learned_file(daemon).exists()
        doctor = signin_broker("--socket", str(socket_path), "doctor", env=daemon.env)
        assert 'set dpop = "auto"' in doctor.stdout, doctor.stdout


def test_a_device_sign_in_learns_the_requirement_without_asking_again(socket_path: Path) -> None:
    with (
        StubProvider(clients=[MUST_PROVE], dpop=True, device_interval=1) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
        watching(socket_path) as events,
        BrokerClient(socket_path) as broker,
    ):
        started = broker.begin_sign_in(device=True)
        wait_for_polls(stub, 1)  # the first, without a proof, was refused
        stub.approve_device(started.user_code)
        assert events.wait_for(EventKind.SIGNED_IN, timeout=15).account == "user:1001"
        polls = [bool(poll.headers.get("dpop")) for poll in stub.token_requests(DEVICE_GRANT)]
        assert polls[0] is False and set(polls[1:]) == {True}, polls
        codes = [r for r in stub.requests if r.path == stub.paths.device_authorization]
        assert len(codes) == 1  # one code shown, never a second one to enter
        assert broker.get_token().dpop_bound_by == "provider"
        assert learned_file(daemon).exists()


def test_a_device_code_the_refusal_spent_fails_once_then_the_next_proves_from_its_first_poll(
    socket_path: Path,
) -> None:
    with (
        StubProvider(clients=[MUST_PROVE], dpop=True, device_interval=2) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon,
        BrokerClient(socket_path) as broker,
    ):
        with watching(socket_path) as events:
            started = broker.begin_sign_in(device=True)
            stub.approve_device(started.user_code)  # before the first poll, 2 s away
            failed = events.wait_for(EventKind.SIGN_IN_FAILED, timeout=15)
        assert "requires DPoP of this client" in failed.detail
        assert "the new sign-in sends proofs from the start" in failed.detail
        assert learned_file(daemon).exists()
        stub.clear_requests()
        with watching(socket_path) as events:
            again = broker.begin_sign_in(device=True)
            stub.approve_device(again.user_code)
            assert events.wait_for(EventKind.SIGNED_IN, timeout=15).account == "user:1001"
        polls = stub.token_requests(DEVICE_GRANT)
        assert polls and all(poll.headers.get("dpop") for poll in polls)
        assert broker.get_token().token_type == "DPoP"


def wait_for_polls(stub: StubProvider, count: int) -> None:
    deadline = time.monotonic() + 15
    while len(stub.token_requests(DEVICE_GRANT)) < count:
        assert time.monotonic() < deadline, "the daemon did not poll"
        time.sleep(0.05)


def test_with_dpop_off_a_client_that_must_prove_hears_which_setting_stands_in_the_way(
    socket_path: Path,
) -> None:
    with (
        StubProvider(clients=[MUST_PROVE], dpop=True) as stub,
        DaemonProcess(socket_path, "--issuer", stub.issuer, "--dpop", "off") as daemon,
        Browser() as browser,
    ):
        page = sign_in(browser, daemon)
    assert page.status_code == 200 and "Sign-in failed" in page.text
    assert "remove dpop = &quot;off&quot; for it" in page.text, page.text
    assert len(stub.token_requests("authorization_code")) == 1  # no proof is ever sent
    assert not learned_file(daemon).exists()


@pytest.mark.parametrize("where", ["managed", "flag"])
def test_the_setting_asks_for_dpop_and_a_bound_account_keeps_working_on_the_defaults(
    socket_path: Path, where: str
) -> None:
    """Bound by the setting (a managed file's, or an older default's), then defaults again."""
    with StubProvider(dpop=True) as stub:
        if where == "managed":
            socket_path.parent.mkdir(mode=0o700)  # the daemon's own folder: private
            managed = socket_path.parent / "system-config" / "signin-broker"
            managed.mkdir(parents=True)
            (managed / "config.toml").write_text('dpop = "auto"\n')
            daemon = signed_in_daemon(stub, socket_path)
        else:
            daemon = signed_in_daemon(stub, socket_path, "--dpop", "auto")
        with BrokerClient(socket_path) as broker:
            bound = broker.get_token()
            (provider,) = broker.status().providers
        assert (bound.token_type, bound.dpop_bound_by) == ("DPoP", "setting")
        assert provider.dpop == "auto" and "dpop" in provider.setting_sources
        daemon.stop()
        if where == "managed":
            (managed / "config.toml").unlink()
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as broker,
        ):
            renewed = broker.get_token(refused=True)  # renewed with the stored key's proof
            proof = broker.sign_dpop_proof("GET", stub.base_url + stub.paths.userinfo)
            status = broker.status()
        assert (renewed.token_type, renewed.dpop_bound_by) == ("DPoP", "setting")
        assert userinfo(stub, proof.headers) == 200
        assert status.providers[0].dpop == "if-required"
        assert status.default is not None and status.default.dpop_bound_by == "setting"
