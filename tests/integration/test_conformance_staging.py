"""`signin-broker conformance --issuer`: aimed at a staging provider without patching anything.

The staging provider here is a stub that behaves like a real one: it knows only its own
client id, shows a consent page and a device confirmation instead of approving, and has
an admin API only the staging admin's own command can call. The hooks are the scripts
of tests/support/staging_hooks.py, run as a user's commands are.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from signin_broker_testing import StubProvider
from signin_broker_testing.models import StubClient, StubUser
from support.commands import signin_broker
from support.staging_hooks import MADE_UP_SECRET

ADMIN_TOKEN_ENV = "SIGNIN_BROKER_CONFORMANCE_ADMIN_TOKEN"
HOOKS = f"{sys.executable} {Path(__file__).parents[1] / 'support' / 'staging_hooks.py'}"
CALLBACK = "/auth/oauth2/id-provider/callback"
USER = StubUser(sub="1001", name="Alice Example", workspaces=("7",))


@pytest.fixture
def staging() -> Iterator[StubProvider]:
    """A provider that asks the person (no auto-approve) and knows only `staging-app`."""
    client = StubClient("staging-app", redirect_uris=[f"http://127.0.0.1{CALLBACK}"])
    with StubProvider([USER], [client], auto_approve=None, device_interval=1) as provider:
        yield provider


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def statuses(stdout: str) -> dict[str, str]:
    (line,) = stdout.splitlines()
    return {case: outcome["status"] for case, outcome in json.loads(line)["cases"].items()}


def test_the_staging_client_id_page_port_and_browser_login_reach_the_provider(
    tmp_path: Path, staging: StubProvider
) -> None:
    port = free_port()
    done = signin_broker(
        "conformance", "--surface", "web", "--case", "T4", "--case", "I1", "--json",
        "--issuer", staging.issuer, "--client-id", "staging-app", "--page-port", str(port),
        "--browser-login-command", f"{HOOKS} login {{url}}",
        "--registry", str(tmp_path / "registry.jsonl"), timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # T4 ran on a stub of its own with that stub's client id; I1 at staging with its own.
    assert statuses(done.stdout) == {"T4": "PASS", "I1": "PASS"}
    authorize = [r for r in staging.requests if r.path == staging.paths.authorize]
    assert authorize, "the staging provider was never asked"
    assert {r.params["client_id"] for r in authorize} == {"staging-app"}
    redirect = urlsplit(authorize[0].params["redirect_uri"])
    assert (redirect.hostname, redirect.port, redirect.path) == ("127.0.0.1", port, CALLBACK)
    assert [r.params["sub"] for r in authorize if r.method == "POST"] == ["1001"]  # the hook


def test_tv_signs_in_with_an_approval_command_and_i2_revokes_with_the_admins_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, staging: StubProvider
) -> None:
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)  # only the hook can revoke
    monkeypatch.setenv("STAGING_ADMIN_TOKEN", staging.admin_token)
    done = signin_broker(
        "conformance", "--surface", "tv", "--case", "I1", "--case", "I2", "--json",
        "--issuer", staging.issuer, "--client-id", "staging-app",
        "--approve-device-command", f"{HOOKS} approve {{verification_uri}} {{user_code}}",
        "--revoke-command", f"{HOOKS} revoke {{issuer}} {{sub}}",
        "--registry", str(tmp_path / "registry.jsonl"), timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert statuses(done.stdout) == {"I1": "PASS", "I2": "PASS"}
    approvals = [r for r in staging.requests if r.path == staging.paths.device_verification]
    assert [(r.method, r.params["sub"]) for r in approvals] == [("POST", "1001")] * 2
    revokes = [r for r in staging.requests if r.path == staging.paths.admin_revoke]
    assert [r.params["sub"] for r in revokes] == ["1001"]


def test_a_failing_hook_fails_its_case_and_what_it_printed_stays_out_of_the_registry(
    tmp_path: Path, stub: StubProvider
) -> None:
    registry, page = tmp_path / "registry.jsonl", tmp_path / "grid.html"
    done = signin_broker(
        "conformance", "--surface", "web", "--case", "I2", "--json",
        "--issuer", stub.issuer, "--revoke-command", f"{HOOKS} fail",
        "--registry", str(registry), "--html", str(page), timeout=180,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["cases"]["I2"] == {
        "status": "FAIL",
        "reason": "--revoke-command exited 3 (its output is not recorded: it may hold secrets)",
    }
    assert MADE_UP_SECRET not in done.stdout + registry.read_text() + page.read_text()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--revoke-command", "revoke {token}"], "--revoke-command names {token}"),
        (["--approve-device-command", "approve 'unclosed"], "cannot be split"),
        (["--browser-login-command", "  "], "--browser-login-command is empty"),
        (["--hook-timeout", "0"], "--hook-timeout must be more than 0"),
    ],
)
def test_an_unusable_hook_is_a_usage_error_before_any_case_runs(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    registry = tmp_path / "registry.jsonl"
    done = signin_broker("conformance", "--surface", "web", *flags, "--registry", str(registry))
    assert done.returncode == 2
    assert said in done.stderr
    assert not registry.exists()
