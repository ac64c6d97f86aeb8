"""The example apps as a new user meets them: a usage line, a refusal, a narrowed token."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from signin_broker_testing import StubProvider
from support.commands import signin_broker
from support.signin import signed_in_daemon

EXAMPLES = Path(__file__).parents[2] / "examples"
APP = EXAMPLES / "app_userinfo.py"


def run_app(socket_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(APP), *args],
        env={"SIGNIN_BROKER_SOCKET": str(socket_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_missing_argument_is_a_usage_line(socket_path: Path) -> None:
    for example in ("app_userinfo.py", "tv_app.py"):
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 2, done.stderr
        assert "usage:" in done.stderr and "issuer" in done.stderr
        assert "Traceback" not in done.stderr


def test_a_denied_app_is_told_so_without_a_traceback(stub: StubProvider, socket_path: Path) -> None:
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    done = run_app(socket_path, stub.issuer)
    assert done.returncode == 1
    assert "app: the broker refused:" in done.stderr and "Traceback" not in done.stderr
    daemon.stop()


def test_a_token_narrowed_to_openid_still_greets_someone(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    first = run_app(socket_path, stub.issuer)
    assert "hello to Alice Example <alice@example.com>" in first.stdout, first.stderr
    allowed = signin_broker(
        "--socket", str(socket_path), "apps", "allow", APP.name, "--scope", "openid"
    )
    assert allowed.returncode == 0, allowed.stderr
    narrowed = run_app(socket_path, stub.issuer)
    assert narrowed.returncode == 0, narrowed.stderr
    assert "hello to 1001" in narrowed.stdout and "None" not in narrowed.stdout
    daemon.stop()
