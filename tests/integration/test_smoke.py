"""The daemon's smoke test, on every system CI runs: start, sign in at the stub, serve a token.

It is what .github/workflows/ci.yml runs on Linux, macOS and Windows beside the unit
tests, so it uses only what a port must provide: the daemon's socket, the loopback
sign-in page, the SDK and the one-shot CLI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx2

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from support.commands import BIN
from support.signin import signed_in_daemon


def test_a_daemon_signs_in_at_the_stub_and_serves_a_token(socket_path: Path) -> None:
    with StubProvider() as stub:
        daemon = signed_in_daemon(stub, socket_path)
        try:
            with BrokerClient(daemon.socket_path) as client:
                token = client.get_token(min_ttl_seconds=60)
            assert token.token_type == "Bearer" and token.access_token
            discovery = httpx2.get(f"{stub.issuer}/.well-known/openid-configuration").json()
            userinfo = httpx2.get(
                discovery["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {token.access_token}"},
            )
            assert userinfo.status_code == 200 and userinfo.json()["sub"], userinfo.text
            printed = subprocess.run(
                [str(BIN / "signin-broker"), "--socket", str(socket_path), "token"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert printed.returncode == 0, printed.stderr
            assert printed.stdout.strip() == token.access_token
        finally:
            daemon.stop()
