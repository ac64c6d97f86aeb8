"""JSON nested 50,000 levels deep wherever the daemon reads it: refused like text that is not JSON.

CPython's json recurses once per level, and past about a thousand raises RecursionError,
which no reader here expected. Before the fix, such a state file (a process of the user's
can write one) stopped the daemon at its start, and a provider's token answer of nested
arrays was an INTERNAL error with a traceback, its renewal neither done nor put in doubt.
The native host's frame and the TOML files have their own tests (test_native_host.py,
test_docker_credential.py, tests/unit/test_settings.py and test_app_identity_and_policy.py).
"""

from __future__ import annotations

from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.signin import signed_in_daemon

NESTED = b"[" * 50_000 + b"]" * 50_000


def test_state_files_nested_too_deep_are_unreadable_and_the_daemon_starts_without_them(
    stub: StubProvider, socket_path: Path
) -> None:
    state = socket_path.parent / "state" / "signin-broker"
    for folder in (socket_path.parent, state.parent, state):
        folder.mkdir(mode=0o700)
    for name in ("aliases.json", "dpop-required.json", "managed-config.json"):
        (state / name).write_bytes(NESTED)
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        for message in (
            "the account aliases cannot be read",
            "what sign-ins learned of providers requiring DPoP could not be read",
        ):
            (record,) = daemon.expect_log(msg=message)
            assert "nests deeper than 64 levels" in record["reason"], record
        with BrokerClient(socket_path) as client:
            assert client.status().config_warnings == ()  # the managed files: none known
        assert not daemon.logs_with(severity="error")
        assert daemon.alive


def test_a_token_answer_nested_too_deep_is_an_unusable_answer_not_an_internal_error(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    with BrokerClient(socket_path, timeout=30) as client:
        first = client.get_token()
        stub.break_token_answers("nested_json")
        renewed = client.get_token(refused=True)  # renew now: the answer is nested arrays
        assert renewed.access_token == first.access_token  # what it had, still valid
        assert "not JSON" in client.status().degraded_reason
    assert not daemon.logs_with(severity="error")
    assert daemon.alive
    daemon.stop()
