"""The interoperability checks, one function each, run by every provider's test module.

Each gets a running provider (module-scoped: the provider's token log spans the
module, so counts are taken from a mark) and a fresh daemon folder, and starts the
daemon with only what `RealProvider.daemon_args` says.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import httpx2

from signin_broker.client import BrokerClient, BrokerError, EventKind, NotSignedIn, Token
from signin_broker.session.schedule import MIN_TTL_RENEWAL_FRACTION, REFRESH_AT_FRACTION
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.conformance import registry
from signin_broker_testing.daemon import DaemonProcess
from signin_broker_testing.ledger import SecretLedger
from support.commands import signin_broker
from support.events import watching
from support.providers import CLIENT_ID, USER_EMAIL, RealProvider, sign_in

CALLERS = 50
STALL_SECONDS = 11  # longer than the 10 s after which the daemon used to give up
PAUSE_WITHIN_SECONDS = 30
REVOCATION_LIMIT_SECONDS = 60  # the README's promise (contract I2)
REVALIDATE_SECONDS = 5  # a short re-check keeps the test short; the bound is still 60 s
ENDED = {EventKind.REVOKED, EventKind.SIGNED_OUT}
TESTS = Path(__file__).parents[2]  # on the hooks' PYTHONPATH
CONFORMANCE_SECONDS = 300
CONFORMANCE_TOKEN_TTL = 600  # longer than the run: no case's session ends by expiring


def signed_in_daemon(
    provider: RealProvider, socket_path: Path, *extra: str, env: dict[str, str] | None = None
) -> DaemonProcess:
    """A daemon told only the issuer URL and client id, signed in through the provider's pages."""
    daemon = DaemonProcess(socket_path, *provider.daemon_args(), *extra, env=env).start()
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


def userinfo_status(provider: RealProvider, token: Token) -> int:
    """What the provider's userinfo answers to the token: 200, or 401 once it is revoked."""
    userinfo = provider.discovery()["userinfo_endpoint"]
    headers = {"Authorization": f"Bearer {token.access_token}"}
    return httpx2.get(userinfo, headers=headers, timeout=10).status_code


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
            due = issued + REFRESH_AT_FRACTION * provider.access_token_ttl
            time.sleep(max(0.0, due + 1 - time.time()))
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


def a_stalled_refresh_is_awaited(provider: RealProvider, socket_path: Path) -> None:
    """The provider stalls mid-refresh for longer than the old 10 s timeout: no one is signed out.

    The provider stops itself (SIGSTOP) once it has rotated the refresh token and before
    it answers, and is resumed STALL_SECONDS later. Meanwhile apps keep getting the
    still-valid token and the session stands; then the daemon stores the answer it
    waited for: one refresh grant at the provider, and the next refresh, with the
    rotated refresh token, is accepted (a spent one would be refused, and with it the
    session).
    """
    signed_in_daemon(provider, socket_path)
    assert_refresh_token_issued(provider)
    mark = len(provider.token_requests("refresh_token"))
    ttl = provider.access_token_ttl
    with BrokerClient(socket_path, timeout=30) as app, watching(socket_path) as events:
        first = token_of(app)
        provider.pause_at_next_refresh()
        with ThreadPoolExecutor(1) as pool:
            demanding = pool.submit(token_of, app, min_ttl_seconds=ttl)  # more than it has left
            try:
                provider.wait_paused(PAUSE_WITHIN_SECONDS)
                served = _served_while_paused(provider, app)
                during = app.status()
            finally:
                provider.resume()
            assert time.time() < first.expires_at_unix  # valid all along: no expiry involved
            refused = demanding.exception(timeout=30)
        assert refused is None or _try_again(refused), refused
        events.wait_for(EventKind.REFRESHED, timeout=30)
        renewed = token_of(app)
        # Let it age past the share of its lifetime before which a just-renewed token is not
        # renewed again for a caller's min_ttl (schedule.min_ttl_renewal_allowed).
        aged = ttl - int(MIN_TTL_RENEWAL_FRACTION * ttl) - 1
        time.sleep(max(0.0, renewed.seconds_left() - aged))
        again = token_of(app, min_ttl_seconds=ttl - 2)  # a refresh with the rotated token
        after = app.status()
    # The still-valid token, every time; on a loaded machine the daemon's own renewal may
    # have landed just before the stall, so its token may be the one kept instead.
    assert served and len(set(served)) <= 2, "GetToken did not keep the still-valid token"
    assert during.default is not None and after.default is not None, "signed out"
    assert not ENDED & set(events.kinds()), events.kinds()
    assert renewed.access_token != first.access_token
    assert again.access_token not in (first.access_token, renewed.access_token)
    assert userinfo_status(provider, again) == 200
    refreshes = provider.token_requests("refresh_token")[mark:]
    # The stalled grant and one after it, none refused (a spent refresh token sent again
    # would be); an earlier renewal of the daemon's own may precede them.
    statuses = [r["status"] for r in refreshes]
    assert statuses[-2:] == [200, 200] and set(statuses) == {200}, refreshes
    assert len(statuses) <= 3, refreshes


def _served_while_paused(provider: RealProvider, app: BrokerClient) -> list[str]:
    """GetToken once a second for STALL_SECONDS while the provider stays stopped."""
    served, paused_at = [], time.monotonic()
    while time.monotonic() - paused_at < STALL_SECONDS:
        served.append(token_of(app).access_token)
        time.sleep(1)
    assert provider.paused(), f"{provider.name} was resumed before the stall ended"
    return served


def _try_again(error: BaseException) -> bool:
    """Whether a call was told to try again later (UNAVAILABLE), not to sign in."""
    return isinstance(error, BrokerError) and error.code is grpc.StatusCode.UNAVAILABLE


def revocation_is_seen_within_60_s(provider: RealProvider, socket_path: Path) -> None:
    """The provider's admin revokes the user: GetToken says sign-in required within 60 s.

    The daemon re-checks the session every REVALIDATE_SECONDS (userinfo, then the
    refresh decides); the session ends as REVOKED, and the provider rejects the token.
    """
    signed_in_daemon(provider, socket_path, "--revalidate-seconds", str(REVALIDATE_SECONDS))
    with BrokerClient(socket_path) as app, watching(socket_path) as events:
        token = token_of(app)
        provider.revoke(token.account.removeprefix("user:"))
        revoked_at = time.monotonic()
        while _still_serves(app):
            elapsed = time.monotonic() - revoked_at
            assert elapsed < REVOCATION_LIMIT_SECONDS, f"still signed in {elapsed:.0f} s later"
            time.sleep(0.5)
        events.wait_for(EventKind.REVOKED, timeout=10)
        assert app.status().default is None
    assert userinfo_status(provider, token) == 401  # revoked at the provider


def _still_serves(app: BrokerClient) -> bool:
    try:
        token_of(app)
    except NotSignedIn:
        return False
    return True


def conformance_i_cases_pass(kind: type[RealProvider], folder: Path) -> None:
    """`signin-broker conformance` I1-I3 with --issuer: PASS, the hooks playing person and admin.

    I1 and I2 run against a provider of this kind started for them, whose tokens outlive
    the run, so only the revocation can end I2's session; the login hook fills in its
    pages, the revoke hook is its admin. I3 runs on a stub of its own, by the command's
    design. The daemons the command starts get the provider's daemon settings and a
    short re-check through the environment.
    """
    with kind(folder, CONFORMANCE_TOKEN_TTL) as provider:
        _run_i_cases(provider, folder / "conformance.jsonl")


def _run_i_cases(provider: RealProvider, path: Path) -> None:
    hooks = [sys.executable, "-m", "support.providers.interop_hooks"]
    login = shlex.join([*hooks, "login", provider.name]) + " {url} {redirect_uri}"
    revoke = shlex.join([*hooks, "revoke", provider.name, str(provider.folder)]) + " {issuer} {sub}"
    env = {
        **provider.daemon_env(),
        "SIGNIN_BROKER_REVALIDATE_SECONDS": str(REVALIDATE_SECONDS),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
    }
    done = signin_broker(
        "conformance", "--surface", "web", "--case", "I1", "--case", "I2", "--case", "I3",
        "--workers", "1",  # I2 revokes the user: I1 must be done by then
        "--issuer", provider.issuer, "--client-id", CLIENT_ID,
        "--browser-login-command", login, "--revoke-command", revoke,
        "--registry", str(path), env=env, timeout=CONFORMANCE_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = registry.read(path)
    assert {case: outcome.status for case, outcome in row.cases.items()} == {
        "I1": "PASS",
        "I2": "PASS",
        "I3": "PASS",
    }, done.stderr
