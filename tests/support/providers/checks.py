"""The interoperability checks, one function each, run by every provider's test module.

Each gets a running provider (module-scoped: the provider's token log spans the
module, so counts are taken from a mark) and a fresh daemon folder, and starts the
daemon with only what `RealProvider.daemon_args` says.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

from signin_broker.client import BrokerClient, Token
from signin_broker.testing.browser import Browser, location
from signin_broker.testing.daemon import DaemonProcess
from signin_broker.testing.ledger import SecretLedger
from support.providers import USER_EMAIL, RealProvider, sign_in

CALLERS = 50
REFRESH_AT = 0.75  # of the token's lifetime: the README's promise


def signed_in_daemon(provider: RealProvider, socket_path: Path) -> DaemonProcess:
    """A daemon told only the issuer URL and client id, signed in through the provider's pages."""
    daemon = DaemonProcess(socket_path, *provider.daemon_args()).start()
    with Browser() as browser:
        landed = sign_in(browser, daemon, provider)
    assert landed.status_code == 303 and location(landed) == "/dashboard", daemon.output()
    return daemon


def assert_refresh_token_issued(provider: RealProvider) -> None:
    """The last sign-in's code redemption brought a refresh token (checks that need one)."""
    (redeemed,) = provider.token_requests("authorization_code")[-1:]
    assert redeemed["refresh_token"], (
        "the provider issued no refresh token at sign-in"
        " (OIDC Core 11: offline_access is honoured only with prompt=consent)"
    )


def token_of(app: BrokerClient, **kw: int) -> Token:
    """GetToken; the token joins the secrets no daemon log line may hold."""
    token = app.get_token(**kw)
    SecretLedger.note(token.access_token)
    return token


def sign_in_then_userinfo(provider: RealProvider, socket_path: Path) -> None:
    """Sign-in by issuer URL only; an app's token is accepted by the provider's userinfo."""
    codes = len(provider.token_requests("authorization_code"))
    signed_in_daemon(provider, socket_path)
    with BrokerClient(socket_path) as app:
        token = token_of(app)
        status = app.status()
    assert status.issuer == provider.issuer
    assert status.default is not None and status.default.email == USER_EMAIL
    userinfo = provider.discovery()["userinfo_endpoint"]
    answer = httpx2.get(userinfo, headers={"Authorization": f"Bearer {token.access_token}"})
    assert answer.status_code == 200, answer.text
    assert token.account == f"user:{answer.json()['sub']}"
    assert answer.json()["email"] == USER_EMAIL
    assert [r["status"] for r in provider.token_requests("authorization_code")[codes:]] == [200]


def fifty_callers_past_75_percent_refresh_once(provider: RealProvider, socket_path: Path) -> None:
    """50 apps ask at once past 75 % of the lifetime: one rotating refresh, one new token for all.

    The daemon is paused (SIGSTOP, as a laptop is suspended) before its own renewal
    could start, so the 50 requests are already waiting on its socket when it resumes
    past the 75 % mark: its renewal and the 50 callers meet in one refresh.
    """
    daemon = signed_in_daemon(provider, socket_path)
    assert_refresh_token_issued(provider)
    mark = len(provider.token_requests("refresh_token"))
    with BrokerClient(socket_path, timeout=30) as app:
        first = token_of(app)
        os.kill(daemon.pid, signal.SIGSTOP)
        try:
            issued = first.expires_at_unix - provider.access_token_ttl
            time.sleep(max(0.0, issued + REFRESH_AT * provider.access_token_ttl + 1 - time.time()))
            with ThreadPoolExecutor(CALLERS) as pool:
                together = threading.Barrier(CALLERS)
                calls = [pool.submit(_call_together, app, together) for _ in range(CALLERS)]
                time.sleep(0.5)  # let the requests reach the paused daemon's socket
                os.kill(daemon.pid, signal.SIGCONT)
                served = [call.result(timeout=30) for call in calls]
        finally:
            os.kill(daemon.pid, signal.SIGCONT)
        again = token_of(app)
    renewed = {token.access_token for token in served}
    assert len(renewed) == 1 and first.access_token not in renewed  # one new token for all
    assert again.access_token in renewed  # and kept: no second refresh
    refreshes = provider.token_requests("refresh_token")[mark:]
    assert [r["status"] for r in refreshes] == [200], refreshes  # exactly one refresh grant
    assert refreshes[0]["refresh_token"]  # rotated: a new refresh token came with it


def _call_together(app: BrokerClient, together: threading.Barrier) -> Token:
    together.wait(10)
    return token_of(app)


def restart_restores_the_session(provider: RealProvider, socket_path: Path) -> None:
    """A restarted daemon serves the stored token and refreshes with the stored refresh token."""
    codes = len(provider.token_requests("authorization_code"))
    daemon = signed_in_daemon(provider, socket_path)
    assert_refresh_token_issued(provider)
    with BrokerClient(socket_path) as app:
        before = token_of(app)
    daemon.stop()
    mark = len(provider.token_requests("refresh_token"))
    ttl = provider.access_token_ttl
    with DaemonProcess(socket_path, *provider.daemon_args()), BrokerClient(socket_path) as app:
        assert token_of(app).access_token == before.access_token  # restored: no new sign-in
        time.sleep(max(0.0, before.seconds_left() - (ttl - 3)))  # let it age 3 s
        renewed = token_of(app, min_ttl_seconds=ttl - 2)  # more than it has left: refresh now
        assert renewed.access_token != before.access_token
        assert app.status().default_account == before.account
    assert [r["status"] for r in provider.token_requests("refresh_token")[mark:]] == [200]
    assert len(provider.token_requests("authorization_code")[codes:]) == 1  # the one sign-in
