"""DPoP (RFC 9449) against the stub provider: tokens bound to the daemon's key, end to end.

One stub whose client must use DPoP (`dpop_bound_access_tokens`, its refusal spending
the code) and one daemon on default settings, signed in to it, serve the whole module:
everything DPoP does where a provider requires it. Each test leaves the session signed
in for the next. Where the `dpop` setting asks for it: tests/attacks/test_dpop_attacks.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import requests

from signin_broker.client import BrokerClient, EventKind
from signin_broker.httpx import BrokerAuth
from signin_broker.httpx2 import BrokerAuth as Httpx2Auth
from signin_broker.requests import BrokerAuth as RequestsAuth
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.models import DEFAULT_CLIENT
from support.commands import signin_broker
from support.events import watching
from support.signin import signed_in_daemon
from support.state import decrypted_record

ACCOUNT = "user:1001"
MUST_PROVE = replace(DEFAULT_CLIENT, dpop_bound_access_tokens=True)


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProvider]:
    with StubProvider(clients=[MUST_PROVE], dpop=True, device_interval=1) as provider:
        yield provider


@pytest.fixture(scope="module")
def daemon(stub: StubProvider) -> Iterator[DaemonProcess]:
    folder = short_temp_dir()
    daemon = signed_in_daemon(stub, folder / "run" / "broker.sock")
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def nonces(stub: StubProvider) -> Iterator[None]:
    """The stub demands a DPoP nonce, a fresh one, while the test runs."""
    stub.dpop_nonce = True
    stub.dpop_state.new_nonce()
    yield
    stub.dpop_nonce = False


def userinfo_url(stub: StubProvider) -> str:
    return stub.base_url + stub.paths.userinfo


def test_the_sign_in_binds_the_tokens_to_the_daemons_key(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    exchange = stub.token_requests("authorization_code")[-1]
    assert exchange.headers.get("dpop"), "the code was redeemed without a proof"
    with BrokerClient(daemon.socket_path) as broker:
        token = broker.get_token()
        assert (token.token_type, token.dpop_bound_by) == ("DPoP", "provider")
        status = broker.status()
        assert [(p.dpop, p.dpop_required) for p in status.providers] == [("if-required", True)]
        assert status.default is not None and status.default.dpop_bound_by == "provider"
        as_bearer = httpx.get(
            userinfo_url(stub), headers={"Authorization": f"Bearer {token.access_token}"}
        )
        assert as_bearer.status_code == 401
        proof = broker.sign_dpop_proof("GET", userinfo_url(stub))
        again = broker.sign_dpop_proof("GET", userinfo_url(stub) + "?page=2")
        assert again.dpop != proof.dpop
        rows = wait_for_rows(broker, "dpop_proofs_for", times=2)
    assert proof.access_token == token.access_token and proof.dpop
    assert httpx.get(userinfo_url(stub), headers=proof.headers).json()["sub"] == "1001"
    assert [row.target_account for row in rows] == [ACCOUNT]
    assert stub.base_url in rows[0].payload_json and rows[0].times == 2  # one row per server


def test_through_a_forward_an_app_gets_proofs_but_never_the_key(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    opened = signin_broker(
        "--socket", str(daemon.socket_path), "forward", "--name", "proofs", "--ttl", "60"
    )
    assert opened.returncode == 0, opened.stderr
    with BrokerClient(opened.stdout.strip()) as far:
        proof = far.sign_dpop_proof("GET", userinfo_url(stub))
        assert proof.token_type == "DPoP"
        with_proof = httpx.get(
            userinfo_url(stub),
            headers={"Authorization": f"DPoP {proof.access_token}", "DPoP": proof.dpop},
        )
        assert with_proof.status_code == 200, with_proof.text
        header = json.loads(base64.urlsafe_b64decode(proof.dpop.split(".")[0] + "=="))
        assert "d" not in header["jwk"]  # the proof names the public key only
    closed = signin_broker("--socket", str(daemon.socket_path), "forward", "--close", "proofs")
    assert closed.returncode == 0, closed.stderr


def wait_for_rows(broker: BrokerClient, key: str, times: int) -> list[Any]:
    """The audit rows whose payload has `key`, once they count `times` (written behind)."""
    deadline = time.monotonic() + 10
    while True:
        rows = [row for row in broker.audit_events() if f'"{key}"' in row.payload_json]
        if sum(row.times for row in rows) >= times:
            return rows
        assert time.monotonic() < deadline, f"audit rows {rows}"
        time.sleep(0.05)


def test_renewals_answer_the_providers_nonce(
    stub: StubProvider, daemon: DaemonProcess, nonces: None
) -> None:
    challenged = stub.dpop_state.nonce_challenges
    with BrokerClient(daemon.socket_path) as broker:
        before = broker.get_token()
        renewed = broker.get_token(refused=True)  # a server refused it: renewed at once
    assert renewed.access_token != before.access_token and renewed.token_type == "DPoP"
    assert stub.dpop_state.nonce_challenges == challenged + 1  # one challenge, one retry
    refresh = stub.token_requests("refresh_token")
    assert len(refresh) == 2 and refresh[0].headers["dpop"] != refresh[1].headers["dpop"]


def test_the_http_auth_answers_a_resource_servers_nonce(
    stub: StubProvider, daemon: DaemonProcess, nonces: None
) -> None:
    challenged = stub.dpop_state.nonce_challenges
    auth = BrokerAuth(socket_path=daemon.socket_path)
    with httpx.Client(auth=auth) as http:
        first = http.get(userinfo_url(stub))
        second = http.get(userinfo_url(stub))  # the nonce is known by now
    auth.close()
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["sub"] == "1001"
    assert stub.dpop_state.nonce_challenges == challenged + 1


def with_requests(url: str, socket_path: Path) -> int:
    auth = RequestsAuth(socket_path=socket_path)
    answer = requests.get(url, auth=auth, timeout=10)
    auth.close()
    return answer.status_code


def with_httpx2(url: str, socket_path: Path) -> int:
    auth = Httpx2Auth(socket_path=socket_path)
    with httpx2.Client(auth=auth) as http:
        status = http.get(url).status_code
    auth.close()
    return status


def with_async_httpx(url: str, socket_path: Path) -> int:
    async def run() -> int:
        auth = BrokerAuth(socket_path=socket_path)
        async with httpx.AsyncClient(auth=auth) as http:
            status = (await http.get(url)).status_code
        await auth.aclose()
        return status

    return asyncio.run(run())


@pytest.mark.parametrize("fetch", [with_requests, with_httpx2, with_async_httpx])
def test_each_http_auth_sends_a_proof_and_answers_a_nonce_challenge(
    stub: StubProvider, daemon: DaemonProcess, nonces: None, fetch: Callable[[str, Path], int]
) -> None:
    challenged = stub.dpop_state.nonce_challenges
    # a query and a fragment reach neither the proof nor the daemon (RFC 9449 4.2)
    assert fetch(userinfo_url(stub) + "?probe=1#part", daemon.socket_path) == 200
    assert stub.dpop_state.nonce_challenges == challenged + 1


def test_a_refresh_token_copied_from_the_state_is_worthless_alone(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    record = decrypted_record(daemon, ACCOUNT)
    assert record["dpop_key"]["jwk"]["d"], "the key is kept with the account"
    authorize = [r for r in stub.requests if r.path == stub.paths.authorize][-1]
    assert authorize.params["dpop_jkt"] == record["dpop_key"]["jkt"]  # the code bound to it
    token_url = stub.base_url + stub.paths.token
    stolen = {
        "grant_type": "refresh_token",
        "refresh_token": record["tokens"]["refresh_token"],
        "client_id": "signin-broker",
    }
    answer = httpx2.post(token_url, data=stolen)
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_grant")
    with BrokerClient(daemon.socket_path) as broker:  # the daemon's own copy still works
        assert broker.get_token(refused=True).token_type == "DPoP"


def test_the_cli_prints_both_headers_and_tools_that_cannot_send_them_say_why(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    socket = ("--socket", str(daemon.socket_path))
    url = userinfo_url(stub)
    printed = signin_broker(*socket, "token", "--format", "dpop", "--method", "GET", "--url", url)
    assert printed.returncode == 0, printed.stderr
    headers = dict(line.split(": ", 1) for line in printed.stdout.splitlines())
    assert headers["Authorization"].startswith("DPoP ") and headers["DPoP"]
    assert httpx.get(url, headers=headers).status_code == 200
    show_type = "import os; print(os.environ['SIGNIN_BROKER_TOKEN_TYPE'])"
    child = signin_broker(*socket, "exec", "--", sys.executable, "-c", show_type)
    assert child.stdout.strip() == "DPoP", child.stderr
    lacking = signin_broker(*socket, "token", "--format", "dpop", "--method", "GET")
    assert lacking.returncode == 2 and "--url" in lacking.stderr
    for refused in (
        signin_broker(*socket, "git-credential", "get", input_text="protocol=https\nhost=x\n\n"),
        signin_broker(*socket, "token", "--format", "exec-credential"),
        signin_broker(*socket, "token", "--format", "header"),
    ):
        assert "cannot send DPoP proofs" in refused.stderr, refused.stderr
        assert "provider requires DPoP of the broker's client" in refused.stderr
        assert "DPoP " not in refused.stdout


def test_a_device_sign_in_polls_with_proofs_and_binds_a_new_key(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    old_key = decrypted_record(daemon, ACCOUNT)["dpop_key"]["jkt"]
    with BrokerClient(daemon.socket_path) as broker:
        before = broker.get_token()
        with watching(daemon.socket_path) as events:
            started = broker.begin_sign_in(device=True, account=ACCOUNT)
            stub.approve_device(started.user_code)
            assert events.wait_for(EventKind.SIGNED_IN, timeout=15).account == ACCOUNT
        after = broker.sign_dpop_proof("GET", userinfo_url(stub))
    polls = stub.token_requests("urn:ietf:params:oauth:grant-type:device_code")
    assert polls and all(poll.headers.get("dpop") for poll in polls)
    assert after.token_type == "DPoP" and after.access_token != before.access_token
    assert decrypted_record(daemon, ACCOUNT)["dpop_key"]["jkt"] != old_key
    assert httpx.get(userinfo_url(stub), headers=after.headers).status_code == 200


def test_the_key_survives_a_restart_and_sign_out_revokes_with_a_proof(
    stub: StubProvider, daemon: DaemonProcess
) -> None:
    daemon.stop()
    restarted = DaemonProcess(daemon.socket_path, "--issuer", stub.issuer).start()
    with BrokerClient(restarted.socket_path) as broker:
        renewed = broker.get_token(refused=True)  # renewed with the stored key's proof
        proof = broker.sign_dpop_proof("GET", userinfo_url(stub))
        assert renewed.token_type == "DPoP"
        assert httpx.get(userinfo_url(stub), headers=proof.headers).status_code == 200
        stub.clear_requests()
        assert broker.sign_out().revocation.name == "REVOKED"
    revocations = [r for r in stub.requests if r.path == stub.paths.revocation]
    assert revocations and all(r.headers.get("dpop") for r in revocations)
    assert stub.access_token_info(renewed.access_token)["active"] is False


def test_require_at_a_provider_without_dpop_says_so_at_sign_in(folder: Path) -> None:
    with (
        StubProvider() as plain,
        DaemonProcess(
            folder / "run" / "broker.sock", "--issuer", plain.issuer, "--dpop", "require"
        ) as daemon,
        BrokerClient(daemon.socket_path) as broker,
        Browser() as browser,
    ):
        page = browser.get(broker.begin_sign_in().url)
        env = {**daemon.env, "SIGNIN_BROKER_ISSUER": plain.issuer, "SIGNIN_BROKER_DPOP": "require"}
        doctor = signin_broker("--socket", str(daemon.socket_path), "doctor", "--json", env=env)
    assert doctor.returncode != 0 and "dpop is require, but the provider" in doctor.stdout
    assert page.status_code == 502
    assert "dpop is require, but the provider" in page.text
    assert "no dpop_signing_alg_values_supported" in page.text
    assert not plain.token_requests()
