"""The conformance hooks run a user's command safely, and tv I2 asks the daemon, not userinfo."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from signin_broker.client import NotSignedIn, Token
from signin_broker_testing import StubProvider
from signin_broker_testing.conformance.hooks import REVOKE, Hook
from signin_broker_testing.conformance.steps import wait_until_the_daemon_refuses
from signin_broker_testing.conformance.surfaces import Tv

PRINT_ARGV = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"


def hook(line: str, timeout: float = 30) -> Hook:
    return Hook.parse("--revoke-command", line, REVOKE, timeout)


def test_each_placeholder_is_filled_inside_its_argument_and_no_shell_reads_it() -> None:
    sneaky = "1001; touch /tmp/pwned $(id) 'q' \"d\""
    said = hook(f"{PRINT_ARGV} {{sub}} --at={{issuer}}/x '{{client_id}} and more'").run(
        sub=sneaky, issuer="https://id.example", client_id="app one"
    )
    assert json.loads(said) == [sneaky, "--at=https://id.example/x", "app one and more"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("revoke {token} {sub}", "--revoke-command names {token}; it is given {sub}, {issuer}"),
        ("revoke 'unclosed", "--revoke-command cannot be split into arguments"),
        ("", "--revoke-command is empty"),
    ],
)
def test_a_command_that_cannot_be_used_is_refused_when_given(line: str, said: str) -> None:
    with pytest.raises(ValueError, match="^" + said.replace("{", r"\{").replace("}", r"\}")):
        hook(line)


def test_a_failing_command_is_reported_by_its_exit_status_only() -> None:
    secret = "admin-secret-from-the-hook"
    command = hook(f"{sys.executable} -c 'import sys; print(\"{secret}\"); sys.exit(5)'")
    with pytest.raises(AssertionError) as failure:
        command.run()
    assert str(failure.value) == (
        "--revoke-command exited 5 (its output is not recorded: it may hold secrets)"
    )


def test_a_command_that_hangs_is_ended_at_its_timeout_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    sleeper = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(60)"
    )
    with pytest.raises(AssertionError, match=r"^--revoke-command did not finish within 2 s$"):
        hook(f'{sys.executable} -c "{sleeper}"', timeout=2).run()
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # bounded: SIGKILL takes effect at once
        if not _running(grandchild):
            break
        time.sleep(0.05)
    assert not _running(grandchild), "the command's own child outlived the timeout"


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for a reaper."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_command_that_cannot_start_says_so() -> None:
    with pytest.raises(
        AssertionError, match="^--revoke-command could not be started: No such file"
    ):
        hook("/nonexistent/revoke-user {sub}").run(sub="1001")


# -- tv I2: the daemon must refuse, not only the provider --------------------------------


@dataclass
class _Daemon:
    """GetToken of a daemon that hands out a token the provider never issued, or refuses."""

    serves: bool

    def get_token(self) -> Token:
        if not self.serves:
            raise NotSignedIn(grpc.StatusCode.UNAUTHENTICATED, "sign-in required")
        return Token("never-issued-token", "Bearer", 0, ("openid",), "user:1001")


@dataclass
class _Stage:
    client: _Daemon
    discovery: dict[str, Any]


@pytest.fixture
def provider() -> Iterator[StubProvider]:
    with StubProvider() as stub:
        yield stub


def _stage(provider: StubProvider, serves: bool) -> Any:
    return _Stage(_Daemon(serves), {"userinfo_endpoint": provider.base_url + "/oauth/v2/userinfo"})


def test_tv_i2_fails_while_the_daemon_hands_out_a_token_the_provider_refuses(
    provider: StubProvider,
) -> None:
    stage = _stage(provider, serves=True)
    assert Tv().request(stage) is None  # userinfo refuses the token: 401
    with pytest.raises(AssertionError, match="the daemon still hands out the session"):
        wait_until_the_daemon_refuses(stage, Tv(), limit_seconds=0.3, poll_seconds=0.1)


def test_tv_i2_passes_once_get_token_is_unauthenticated(provider: StubProvider) -> None:
    wait_until_the_daemon_refuses(_stage(provider, serves=False), Tv(), limit_seconds=0.3)
