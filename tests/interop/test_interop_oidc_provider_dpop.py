"""DPoP (RFC 9449) against panva's oidc-provider, whose client must use it, nonces demanded.

The daemon signs in as the provider's second client, registered with
`dpop_bound_access_tokens`, with no `dpop` setting: the provider refuses the code
without a proof (a plain invalid_grant) and takes it with one, and the daemon learns
and keeps that this client must prove; the provider demands its current nonce in every
proof (provider.mjs). Access tokens live 4 s, so renewals come quickly.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import httpx
import httpx2
import pytest

from signin_broker.client import BrokerClient, EventKind, Token
from signin_broker.httpx import BrokerAuth
from signin_broker.oidc.dpop import DpopKey
from signin_broker.session.schedule import REFUSED_RENEWAL_FRACTION
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support.commands import signin_broker
from support.events import watching
from support.providers import approve_device, sign_in
from support.providers.node import DPOP_CLIENT_ID, NodeOidcProvider
from support.state import decrypted_record

ACCESS_TOKEN_TTL = 4
pytestmark = pytest.mark.external  # Node

RENEWALS = 10  # one per quarter lifetime (1 s) at most: about 11 s
RENEWALS_WITHIN_SECONDS = 25
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@pytest.fixture(scope="module")
def provider() -> Iterator[NodeOidcProvider]:
    folder = short_temp_dir()
    with NodeOidcProvider(folder, ACCESS_TOKEN_TTL) as running:
        yield running
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(provider: NodeOidcProvider) -> Iterator[DaemonProcess]:
    folder = short_temp_dir()
    daemon = DaemonProcess(folder / "run" / "broker.sock", *daemon_args(provider)).start()
    with Browser() as browser:
        landed = sign_in(browser, daemon, provider)
    assert landed.status_code == 303 and location(landed) == "/dashboard", daemon.output()
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def daemon_args(provider: NodeOidcProvider) -> tuple[str, ...]:
    """What a user sets for this client: no `dpop`, which the sign-in learns by itself."""
    return (
        *("--issuer", provider.issuer, "--client-id", DPOP_CLIENT_ID),
        *("--scopes", "offline_access"),
    )


def token_of(broker: BrokerClient, **kw: bool) -> Token:
    token = broker.get_token(**kw)
    SecretLedger.note(token.access_token)
    return token


def userinfo(provider: NodeOidcProvider) -> str:
    return str(provider.discovery()["userinfo_endpoint"])


def test_on_defaults_the_sign_in_learns_the_requirement_and_status_says_so(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    """Without a proof: invalid_grant; with one (and its nonce): the same code is redeemed."""
    redeemed = provider.token_requests("authorization_code")
    assert [(r["status"], r.get("error")) for r in redeemed] == [
        (400, "invalid_grant"),  # the plain refusal, the code left as it was
        (400, "use_dpop_nonce"),
        (200, None),
    ]
    assert redeemed[-1]["refresh_token"]
    with BrokerClient(daemon.socket_path) as broker:
        status = broker.status()
        assert broker.get_token().dpop_bound_by == "provider"
    assert [(p.dpop, p.dpop_required) for p in status.providers] == [("if-required", True)]
    assert status.default is not None and status.default.dpop_bound_by == "provider"
    shown = signin_broker("--socket", str(daemon.socket_path), "status")
    assert "the provider requires DPoP of this client" in shown.stdout, shown.stdout


def test_the_apps_token_is_refused_as_bearer_and_accepted_with_a_proof(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    url = userinfo(provider)
    with BrokerClient(daemon.socket_path) as broker:
        token = token_of(broker)
        assert token.token_type == "DPoP"
        bearer = httpx2.get(url, headers={"Authorization": f"Bearer {token.access_token}"})
        assert bearer.status_code == 401
        first = broker.sign_dpop_proof("GET", url)
        challenged = httpx2.get(url, headers=first.headers)  # no nonce yet: one is demanded
        assert challenged.status_code == 401 and challenged.headers["dpop-nonce"]
        proof = broker.sign_dpop_proof("GET", url, nonce=challenged.headers["dpop-nonce"])
    answer = httpx2.get(url, headers=proof.headers)
    assert answer.status_code == 200, answer.headers.get("www-authenticate")
    assert answer.json()["sub"] == "alice"


def test_httpx_with_the_brokers_auth_reaches_userinfo(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    auth = BrokerAuth(socket_path=daemon.socket_path)
    with httpx.Client(auth=auth) as http:
        answers = [http.get(userinfo(provider)) for _ in range(2)]
    auth.close()
    assert [answer.status_code for answer in answers] == [200, 200]


def test_renewals_answer_the_providers_nonces(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    ok_before = _refreshes(provider, 200)
    seen: set[str] = set()
    deadline = time.monotonic() + RENEWALS_WITHIN_SECONDS
    with BrokerClient(daemon.socket_path) as broker:
        while _refreshes(provider, 200) < ok_before + RENEWALS:
            assert time.monotonic() < deadline, provider.token_requests("refresh_token")[-5:]
            token = token_of(broker, refused=True)  # renewed once allowed for a refusal
            assert token.token_type == "DPoP"
            seen.add(token.access_token)
            time.sleep(ACCESS_TOKEN_TTL * REFUSED_RENEWAL_FRACTION)
    refreshes = provider.token_requests("refresh_token")
    assert {r["status"] for r in refreshes} <= {200, 400}  # 400: a nonce asked for, then sent
    assert all(r.get("error") == "use_dpop_nonce" for r in refreshes if r["status"] != 200)
    assert len(seen) >= RENEWALS - 1


def test_a_refresh_token_taken_from_the_state_is_refused_without_its_key(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    with BrokerClient(daemon.socket_path) as broker:
        account = token_of(broker).account
    stolen = decrypted_record(daemon, account)["tokens"]["refresh_token"]
    form = {"grant_type": "refresh_token", "refresh_token": stolen, "client_id": DPOP_CLIENT_ID}
    token_url = str(provider.discovery()["token_endpoint"])
    alone = httpx2.post(token_url, data=form)
    assert alone.status_code == 400, alone.text
    thief = DpopKey.generate("ES256")  # a proof, but by another key
    nonce = httpx2.post(token_url, data=form, headers={"DPoP": thief.proof("POST", token_url)})
    proof = thief.proof("POST", token_url, nonce=nonce.headers["dpop-nonce"])
    other_key = httpx2.post(token_url, data=form, headers={"DPoP": proof})
    assert (other_key.status_code, other_key.json()["error"]) == (400, "invalid_grant")
    with BrokerClient(daemon.socket_path) as broker:  # the daemon's own copy still serves
        assert token_of(broker, refused=True).token_type == "DPoP"


def test_sign_out_revokes_the_bound_tokens(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    with BrokerClient(daemon.socket_path) as broker:
        record = decrypted_record(daemon, token_of(broker).account)
        assert broker.sign_out().revocation.name == "REVOKED"
    key = DpopKey.from_record(record["dpop_key"])  # even with the daemon's own key now
    assert key is not None
    token_url = str(provider.discovery()["token_endpoint"])
    form = {
        "grant_type": "refresh_token",
        "refresh_token": record["tokens"]["refresh_token"],
        "client_id": DPOP_CLIENT_ID,
    }
    nonce = httpx2.post(token_url, data=form, headers={"DPoP": key.proof("POST", token_url)})
    proof = key.proof("POST", token_url, nonce=nonce.headers["dpop-nonce"])
    revoked = httpx2.post(token_url, data=form, headers={"DPoP": proof})
    assert (revoked.status_code, revoked.json()["error"]) == (400, "invalid_grant")


def test_after_a_restart_the_next_sign_in_proves_from_its_first_request(
    provider: NodeOidcProvider, daemon: DaemonProcess
) -> None:
    daemon.stop()  # signed out by the test before; what it learned is in the state folder
    mark = len(provider.token_requests("authorization_code"))
    with DaemonProcess(daemon.socket_path, *daemon_args(provider)) as again, Browser() as browser:
        landed = sign_in(browser, again, provider)
        assert landed.status_code == 303, again.output()
        with BrokerClient(again.socket_path) as broker:
            assert broker.get_token().dpop_bound_by == "provider"
    redeemed = provider.token_requests("authorization_code")[mark:]
    assert [r.get("error") for r in redeemed] == ["use_dpop_nonce", None]  # no invalid_grant


def test_a_device_sign_in_learns_the_requirement_from_a_refused_poll_and_asks_no_one_again(
    provider: NodeOidcProvider,
) -> None:
    """oidc-provider refuses a poll without a proof at once (invalid_grant), the device code
    left as it was; the next polls carry proofs and the one code shown signs in."""
    folder = short_temp_dir()
    socket = folder / "run" / "broker.sock"
    mark = len(provider.token_requests(DEVICE_GRANT))
    with (
        DaemonProcess(socket, *daemon_args(provider)),
        watching(socket) as events,
        BrokerClient(socket) as broker,
    ):
        started = broker.begin_sign_in(device=True)
        deadline = time.monotonic() + 15
        while not provider.token_requests(DEVICE_GRANT)[mark:]:  # the first poll, refused
            assert time.monotonic() < deadline, "the daemon did not poll"
            time.sleep(0.05)
        with Browser() as browser:
            approve_device(browser, provider, started.url)
        assert events.wait_for(EventKind.SIGNED_IN, timeout=30).account == "user:alice"
        token = token_of(broker)
    polls = [(r["status"], r.get("error")) for r in provider.token_requests(DEVICE_GRANT)[mark:]]
    assert polls[0] == (400, "invalid_grant") and polls[-1] == (200, None), polls
    assert set(polls[1:-1]) <= {(400, "use_dpop_nonce"), (400, "authorization_pending")}, polls
    assert (token.token_type, token.dpop_bound_by) == ("DPoP", "provider")
    shutil.rmtree(folder, ignore_errors=True)


def _refreshes(provider: NodeOidcProvider, status: int) -> int:
    return sum(r["status"] == status for r in provider.token_requests("refresh_token"))
