"""The headless example (signin_broker.examples.sync_agent): renewals, a revocation, a new sign-in.

A background program with no terminal and no display keeps working on the broker's
tokens, stops calling when the provider ends the session, and resumes by itself when
the person signs in again; it never runs an OAuth flow of its own.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from signin_broker import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.lines import Lines
from support.signin import sign_in, signed_in_daemon

AGENT = "signin_broker.examples.sync_agent"


def userinfo_calls(stub: StubProvider) -> int:
    return sum(1 for r in stub.requests if r.path.endswith("/userinfo") and r.method == "GET")


def start_agent(
    socket_path: Path, url: str, interval: float = 0.2
) -> tuple[subprocess.Popen[str], Lines]:
    agent = subprocess.Popen(
        [sys.executable, "-m", AGENT, url, "--interval", str(interval)],
        env={"SIGNIN_BROKER_SOCKET": str(socket_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert agent.stdout is not None
    return agent, Lines(agent.stdout)


def parked(agent: subprocess.Popen[str], lines: Lines) -> None:
    """Wait until a paused agent's loop has come round to its pause: no call is on its way.

    Woken by a person (SIGUSR1), the loop says it cannot sync as it passes, so the line
    comes only once any call begun before the pause has ended.
    """
    agent.send_signal(signal.SIGUSR1)
    lines.wait_for("not synced: waiting for a sign-in")


def test_the_agent_pauses_at_a_revocation_and_resumes_at_the_next_sign_in(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--revalidate-seconds", "2")
    userinfo = httpx2.get(stub.discovery_url, timeout=10).json()["userinfo_endpoint"]
    agent, lines = start_agent(socket_path, userinfo)
    try:
        lines.wait_for("synced as Alice Example")
        stub.revoke_user("1001")
        # From the event, or from the broker's refusal if the agent asked first.
        assert "the provider ended the session" in lines.wait_for("paused:")
        parked(agent, lines)  # a call already on its way when the event came has landed
        calls = userinfo_calls(stub)
        time.sleep(1.0)  # five of its intervals
        parked(agent, lines)  # asked to sync now, it still does not call
        assert userinfo_calls(stub) == calls  # it stopped calling
        with Browser() as browser:
            sign_in(browser, daemon)
        lines.wait_for("resumed: user:1001 signed in again")
        lines.wait_for("synced as Alice Example")
        assert len(stub.token_requests("authorization_code")) == 2  # the person's two, no more
    finally:
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(30)
    assert code == 0
    lines.wait_for("stopped")
    daemon.stop()


def test_the_agent_stops_on_sigterm_while_it_waits_for_a_sign_in(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    userinfo = httpx2.get(stub.discovery_url, timeout=10).json()["userinfo_endpoint"]
    agent, lines = start_agent(socket_path, userinfo)
    try:
        lines.wait_for("synced as Alice Example")
        with BrokerClient(socket_path) as client:
            assert client.sign_out().was_signed_in
        lines.wait_for("paused:")
        parked(agent, lines)
    finally:
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(10)
    assert code == 0
    lines.wait_for("stopped")
    daemon.stop()


def test_sigterm_right_after_a_wake_stops_the_agent_every_time(
    stub: StubProvider, socket_path: Path
) -> None:
    """A stop landing as a wake ends its wait is not lost.

    The hang it guards against (asyncio.wait_for on Python 3.11 swallowing the
    cancellation) showed in the grid's backend stages, after a resume and a wake; this
    loop did not reproduce it on the old code, the grid's every stage close does.
    """
    daemon = signed_in_daemon(stub, socket_path)
    userinfo = httpx2.get(stub.discovery_url, timeout=10).json()["userinfo_endpoint"]
    for _ in range(5):
        agent, lines = start_agent(socket_path, userinfo, interval=3600)
        try:
            lines.wait_for("synced as Alice Example")
            agent.send_signal(signal.SIGUSR1)
            lines.wait_for("synced as Alice Example")
        finally:
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(10)
        assert code == 0
    daemon.stop()
