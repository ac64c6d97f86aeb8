"""Service accounts: a device with no person gets tokens by the client credentials grant.

The stub registers a confidential client (a secret, or a key for private_key_jwt); the
daemon's provider says `grant = "client_credentials"`. Its account is there from the
start with no sign-in; two apps and a token file share one grant per token lifetime; a
down-scoped token names its audience (RFC 8707 resource); a refused secret is said in
status and the doctor; and what needs a person (a sign-in, a step-up, an ID token, a
sign-out) is refused with FAILED_PRECONDITION. No test needs a browser.
(tests/interop/test_interop_service_accounts.py: the same at oidc-provider and
django-oauth-toolkit.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import pytest

from signin_broker.client import BrokerClient, BrokerError
from signin_broker_testing import StubClient, StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.docs_blocks import blocks, replaced
from support.service_accounts import new_key, new_secret, private_file, settings
from support.token_files import config, held
from support.waiting import eventually

TTL = 2
AUDIENCE = "https://api.example.com/"
SECRET = new_secret()


def kiosk(
    method: str = "client_secret_basic", jwks: dict | None = None, client_id: str = "kiosk"
) -> StubClient:
    secret = SECRET if method.startswith("client_secret") else ""
    return StubClient(
        client_id, (), token_endpoint_auth_method=method, client_secret=secret, jwks=jwks
    )


def started(stub: StubProvider, folder: Path, secret: str = SECRET, **files: dict) -> DaemonProcess:
    credential = private_file(folder, "kiosk-secret", secret)
    conf = config(folder / "kiosk.toml", files, *settings(stub.issuer, "kiosk", credential))
    return DaemonProcess(folder / "run" / "broker.sock", "--config", str(conf)).start()


def test_two_apps_and_two_files_share_one_grant_per_lifetime(folder: Path) -> None:
    main, scoped = folder / "tokens" / "main", folder / "tokens" / "api"
    with StubProvider(clients=[kiosk()], access_token_ttl=TTL, auto_approve=None) as stub:
        daemon = started(
            stub, folder, main={"path": str(main)}, api={"path": str(scoped), "audience": AUDIENCE}
        )
        socket = str(daemon.socket_path)
        served = set()
        with BrokerClient(daemon.socket_path) as client:
            started_at = time.monotonic()
            while time.monotonic() - started_at < 2 * TTL:  # bounded: two lifetimes
                served.add(client.get_token().access_token)  # this app
                cli = signin_broker("--socket", socket, "token")  # another app
                assert cli.returncode == 0, cli.stderr
                served.add(cli.stdout.strip())
                time.sleep(0.1)
            (account,) = client.accounts()
            status = client.status()
        lifetimes = (time.monotonic() - started_at) / TTL + 1
        grants = stub.token_requests("client_credentials")
        main_grants = [r for r in grants if "resource" not in r.params]
        assert 2 <= len(main_grants) <= lifetimes + 1, len(main_grants)  # one per lifetime
        assert all(stub.access_token_info(token)["sub"] == "kiosk" for token in served)  # type: ignore[index]
        assert account.id == "user:kiosk" and account.service_account and not account.at_risk
        assert status.providers[0].grant == "client_credentials"
        assert stub.access_token_info(held(main, "token"))["active"]  # type: ignore[index]
        info = stub.access_token_info(held(scoped, "token"))
        assert info is not None and info["audience"] == AUDIENCE and info["sub"] == "kiosk"
        assert all(
            r.params.get("grant_type") == "client_credentials" for r in stub.token_requests()
        )
        daemon.stop()


def client_token(daemon: DaemonProcess) -> str:
    with BrokerClient(daemon.socket_path) as client:
        return client.get_token().access_token


def test_the_kiosk_of_the_how_to_runs_as_written(folder: Path) -> None:
    """docs/how-to/service-accounts.md's config, its paths, issuer and scope this machine's."""
    (page,) = blocks("how-to/service-accounts.md", "", "toml")
    secret = private_file(folder, "client-secret", SECRET)
    conf = folder / "kiosk.toml"
    with StubProvider(clients=[kiosk(client_id="kiosk-17")], auto_approve=None) as stub:
        conf.write_text(
            replaced(
                page,
                {
                    "https://id.example.com": stub.issuer,
                    "/home/kiosk/.config/signin-broker/client-secret": str(secret),
                    "/home/kiosk/.local/state/signage/token": str(folder / "signage" / "token"),
                    "signage.read": "read",  # a scope the stub has
                },
            )
        )
        with DaemonProcess(folder / "run" / "broker.sock", "--config", str(conf)) as daemon:
            token = eventually(lambda: exists_and_held(folder / "signage" / "token"), "the file")
            listed = signin_broker("--socket", str(daemon.socket_path), "accounts").stdout
        assert stub.access_token_info(token)["sub"] == "kiosk-17"  # type: ignore[index]
        assert "* user:kiosk-17" in listed and "service account" in listed


def exists_and_held(path: Path) -> str:
    return held(path, "token") if path.exists() else ""


def test_a_refused_secret_is_said_in_status_and_the_doctor(
    folder: Path, execd_daemons: None
) -> None:
    with StubProvider(clients=[kiosk("client_secret_post")], auto_approve=None) as stub:
        daemon = started(stub, folder, secret="not-" + SECRET)
        with BrokerClient(daemon.socket_path) as client:
            (account,) = eventually(
                lambda: [a for a in client.accounts() if a.at_risk], "the refusal said"
            )
            assert "invalid_client" in account.at_risk and "client_secret_file" in account.at_risk
            assert "invalid_client" in client.status().providers[0].degraded_reason
            with pytest.raises(BrokerError) as refused:
                client.get_token()
            assert "invalid_client" in refused.value.message
        doctor = signin_broker("--socket", str(daemon.socket_path), "doctor", "--json", timeout=60)
        found = {f["name"]: f for f in json.loads(doctor.stdout)["findings"]}
        assert doctor.returncode == 1
        said = found["tokens (user:kiosk)"]
        assert said["status"] == "fail" and "invalid_client" in said["seen"]
        daemon.stop()


def test_a_private_key_jwt_client_gets_its_token(folder: Path) -> None:
    pem, jwks = new_key()
    with StubProvider(clients=[kiosk("private_key_jwt", jwks)], auto_approve=None) as stub:
        key = private_file(folder, "kiosk.pem", pem)
        conf = config(folder / "kiosk.toml", {}, *settings(stub.issuer, "kiosk", key, key=True))
        with DaemonProcess(folder / "run" / "broker.sock", "--config", str(conf)) as daemon:
            token = client_token(daemon)
        assert stub.access_token_info(token)["sub"] == "kiosk"  # type: ignore[index]
        (grant,) = stub.token_requests("client_credentials")
        assert grant.params["client_assertion_type"].endswith("jwt-bearer")
        assert "client_secret" not in grant.params


def test_what_needs_a_person_is_refused_with_failed_precondition(folder: Path) -> None:
    with StubProvider(clients=[kiosk()], auto_approve=None) as stub:
        daemon = started(stub, folder)
        with BrokerClient(daemon.socket_path) as client:
            forward = client.open_forward("ids", ttl_seconds=60, id_token=True)
            with BrokerClient(Path(forward.socket_path)) as allowed_id_tokens:
                refusals = {
                    "sign-in": client.begin_sign_in,
                    "step-up": lambda: client.get_token(acr_values="urn:stub:acr:mfa"),
                    "ID token": lambda: allowed_id_tokens.get_token(id_token=True),
                    "sign-out": client.sign_out,
                    "removal": lambda: client.remove_account("user:kiosk"),
                }
                for what, call in refusals.items():
                    with pytest.raises(BrokerError) as refused:
                        call()
                    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION, what
                    assert "is a service account" in refused.value.message, what
            assert client.get_token().account == "user:kiosk"  # still served
        login = signin_broker("--socket", str(daemon.socket_path), "login", "--no-browser")
        assert login.returncode != 0 and "no person" in login.stderr
        daemon.stop()
