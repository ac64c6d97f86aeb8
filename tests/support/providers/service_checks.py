"""The service account checks every real provider runs: a client's own tokens, no person.

The provider registers KIOSK_ID, a confidential client allowed the client credentials
grant alone, whose tokens live SERVICE_TOKEN_TTL seconds. The daemon is told the issuer,
`grant = "client_credentials"`, the client id and its secret or key file. Two apps (this
test process and `signin-broker token`) and a token file ask over 1.5 lifetimes: the
provider sees one grant per lifetime, and its introspection says each token is the
client's and active.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx2

from signin_broker.client import BrokerClient
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.providers import KIOSK_ID, SERVICE_TOKEN_TTL, RealProvider
from support.service_accounts import private_file, settings
from support.token_files import config, held
from support.waiting import eventually


def introspected(provider: RealProvider, token: str, secret: str) -> dict[str, object]:
    """The provider's introspection of a token (RFC 7662), asked as KIOSK_ID."""
    endpoint = (
        provider.discovery().get("introspection_endpoint") or provider.issuer + "/introspect/"
    )
    answer = httpx2.post(str(endpoint), data={"token": token}, auth=(KIOSK_ID, secret), timeout=15)
    answer.raise_for_status()
    return dict(answer.json())


def next_token(path: Path, current: str) -> str:
    """The token the file holds once it no longer holds `current` (within two lifetimes)."""
    return eventually(
        lambda: (token := held(path, "token")) != current and token,
        "the token file renewed",
        timeout=2 * SERVICE_TOKEN_TTL + 10,
        every=0.02,
    )


def two_apps_and_a_file_share_one_grant_per_lifetime(
    provider: RealProvider, folder: Path, *, key: bytes | None = None
) -> None:
    """With the client's secret, or with `key` (PEM) for `KIOSK_ID-jwt` (private_key_jwt)."""
    client_id = f"{KIOSK_ID}-jwt" if key else KIOSK_ID
    credential = private_file(folder, "credential", key or provider.kiosk_secret)
    path = folder / "tokens" / "api"
    lines = settings(provider.issuer, client_id, credential, key=key is not None)
    conf = config(folder / "kiosk.toml", {"api": {"path": str(path)}}, *lines)
    before = len(provider.token_requests("client_credentials"))
    served = set()
    with (
        DaemonProcess(folder / "run" / "broker.sock", "--config", str(conf)) as daemon,
        BrokerClient(daemon.socket_path, timeout=20) as client,
    ):
        started = time.monotonic()
        while time.monotonic() - started < 1.5 * SERVICE_TOKEN_TTL:  # bounded: 1.5 lifetimes
            served.add(client.get_token().access_token)
            other = signin_broker("--socket", str(daemon.socket_path), "token")
            assert other.returncode == 0, other.stderr
            served.add(other.stdout.strip())
            time.sleep(0.1)
        lifetimes = (time.monotonic() - started) / SERVICE_TOKEN_TTL + 1
        grants = provider.token_requests("client_credentials")[before:]
        (account,) = client.accounts()
        # The file's next token, just written: it has a whole lifetime (2 s) while the
        # provider is asked of it, where the one it holds now may have 0.5 s left.
        in_the_file = next_token(path, held(path, "token"))
        info = introspected(provider, in_the_file, provider.kiosk_secret) if not key else None
    assert all(grant["status"] == 200 for grant in grants), grants
    assert 2 <= len(grants) <= lifetimes + 1, (len(grants), lifetimes)  # one per lifetime
    assert account.id == f"user:{client_id}" and account.service_account
    assert info is None or (info["active"] and info["client_id"] == KIOSK_ID), info
    assert len(served) >= 2  # renewed as each fell due
