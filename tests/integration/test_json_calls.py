"""Unary calls as JSON over HTTP/1.1 on the daemon's one socket.

curl (a real program nobody here wrote) and the CLI's standard-library client call
the daemon as a script would; gRPC keeps working on the same socket. The same kernel
check, policy and audit apply: another uid is closed unanswered, a denied app gets 403.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from signin_broker.cli._json_client import json_call
from signin_broker.client import BrokerClient
from signin_broker.v1 import broker_pb2
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.apps import write_policy
from support.commands import curl_json as curl
from support.other_user import other_user
from support.signin import signed_in_daemon

SERVICE = "/signin_broker.v1.TokenBroker/"
UNARY = [m.name for m in broker_pb2.DESCRIPTOR.services_by_name["TokenBroker"].methods
         if not m.server_streaming]  # fmt: skip
# Called with an empty body these change nothing, so they share the module's daemon; any
# other method (a sign-out, say) gets a daemon of its own.
LEAVES_THE_DAEMON_AS_IT_WAS = {
    "GetToken", "GetStatus", "ListAccounts", "GetSignInQr", "ListApps", "ListAuditEvents",
    "ListForwards", "SignDpopProof",
}  # fmt: skip


@pytest.fixture
def broker(stub: StubProvider, socket_path: Path) -> Iterator[DaemonProcess]:
    """A daemon of the test's own, for a test that changes it."""
    daemon = signed_in_daemon(stub, socket_path)
    yield daemon
    daemon.stop()


def test_curl_gets_a_token_and_grpc_still_works_on_the_same_socket(
    shared_broker: DaemonProcess, shared_stub: StubProvider
) -> None:
    status, token = curl(shared_broker.socket_path, "GetToken")
    assert status == 200
    assert token["account"] == "user:1001" and token["token_type"] == "Bearer"
    assert int(token["expires_at_unix"]) > 0
    assert shared_stub.access_token_info(token["access_token"])["active"] is True
    with BrokerClient(shared_broker.socket_path) as client:
        assert client.get_token().access_token == token["access_token"]


@pytest.mark.parametrize("method", UNARY)
def test_every_unary_rpc_answers_json(request: pytest.FixtureRequest, method: str) -> None:
    """Each answers its response message, or its gRPC refusal mapped to HTTP, never a 500."""
    shared = method in LEAVES_THE_DAEMON_AS_IT_WAS
    broker = request.getfixturevalue("shared_broker" if shared else "broker")
    status, body = curl(broker.socket_path, method)
    assert status in {200, 400, 403, 404}, (status, body)
    if status != 200:
        assert set(body) == {"error", "code"} and isinstance(body["error"], str)


@pytest.mark.parametrize(
    ("method", "body", "status", "code"),
    [
        ("GetToken", '{"min_ttl_seconds": 99999999}', 400, "invalid_argument"),
        ("GetToken", "not json", 400, "invalid_argument"),
        ("GetToken", '{"no_such_field": 1}', 400, "invalid_argument"),
        ("GetToken", '{"account": "user:9999"}', 404, "not_found"),
        ("GetToken", '{"scopes": ["openid", "admin"]}', 400, "failed_precondition"),
        ("RemoveAccount", "{}", 400, "invalid_argument"),
        ("NoSuchMethod", "{}", 404, "not_found"),
        ("WatchEvents", "{}", 404, "not_found"),  # streams stay gRPC's
    ],
)
def test_errors_are_the_grpc_status_mapped_to_http_with_an_error_body(
    shared_broker: DaemonProcess, method: str, body: str, status: int, code: str
) -> None:
    answered, error = curl(shared_broker.socket_path, method, body)
    assert (answered, error["code"]) == (status, code), error
    assert error["error"]
    assert shared_broker.alive


def test_not_signed_in_is_401(stub: StubProvider, socket_path: Path) -> None:
    with DaemonProcess(socket_path, "--issuer", stub.issuer) as daemon:
        status, error = curl(daemon.socket_path, "GetToken")
    assert (status, error["code"]) == (401, "unauthenticated")


def test_a_wrong_content_type_a_get_and_an_oversized_body_are_refused(
    shared_broker: DaemonProcess,
) -> None:
    status, error = curl(
        shared_broker.socket_path, "GetStatus", "{}", "-H", "Content-Type: text/plain"
    )
    assert (status, error["code"]) == (400, "invalid_argument")
    status, _ = curl(shared_broker.socket_path, "GetStatus", "{}", "-X", "GET")
    assert status == 405
    big = json.dumps({"account": "x" * (70 * 1024)})
    status, _ = curl(shared_broker.socket_path, "GetToken", big)
    assert status == 413
    assert curl(shared_broker.socket_path, "GetStatus")[0] == 200


def test_a_caller_still_sending_a_refused_body_reads_the_refusal(
    shared_broker: DaemonProcess,
) -> None:
    """The daemon refuses an oversized body at its head, but closes only once the caller
    stopped sending: a client that sends it all before reading gets the 413, not EPIPE."""
    body = b"x" * (70 * 1024)
    head = (
        f"POST {SERVICE}GetToken HTTP/1.1\r\nHost: broker\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
        caller.settimeout(10)
        caller.connect(str(shared_broker.socket_path))
        caller.sendall(head)
        assert caller.recv(12) == b"HTTP/1.1 413"  # refused before the body came
        caller.sendall(body)  # the daemon reads it away instead of closing on it
        answer = b""
        while chunk := caller.recv(65536):  # bounded: the daemon closes within seconds
            answer += chunk
    assert b"larger than" in answer
    assert curl(shared_broker.socket_path, "GetStatus")[0] == 200


def test_a_refused_caller_that_goes_quiet_is_closed_all_the_same(
    shared_broker: DaemonProcess,
) -> None:
    """After a refusal the daemon waits for the rest of a request a few seconds, not forever."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as caller:
        caller.settimeout(10)
        caller.connect(str(shared_broker.socket_path))
        caller.sendall(f"GET {SERVICE}GetStatus HTTP/1.1\r\nHost: broker\r\n\r\n".encode())
        assert caller.recv(12) == b"HTTP/1.1 405"
        deadline = time.monotonic() + 10
        with pytest.raises(OSError):  # EPIPE or ECONNRESET once the daemon closed
            while time.monotonic() < deadline:
                caller.sendall(b"x")  # a trickle, never enough to be closed for its size
                time.sleep(0.1)
        assert time.monotonic() < deadline


def test_the_caller_is_the_kernels_word_and_the_token_is_audited_as_for_grpc(
    shared_broker: DaemonProcess,
) -> None:
    status, info = curl(shared_broker.socket_path, "GetStatus")
    assert status == 200
    assert info["caller"]["executable"] == os.path.realpath("/usr/bin/curl")
    curl(shared_broker.socket_path, "GetToken")
    with BrokerClient(shared_broker.socket_path) as client:
        rows = client.audit_events(limit=50)
    issued = [r for r in rows if r.action == "issue_token"]
    assert any(r.actor_app == os.path.realpath("/usr/bin/curl") for r in issued)


def test_a_denied_app_is_refused_through_json_too(broker: DaemonProcess) -> None:
    from signin_broker.daemon.apps.policy import AppRule, Decision

    write_policy(broker.socket_path, AppRule(os.path.realpath("/usr/bin/curl"), Decision.DENY))
    status, error = curl(broker.socket_path, "GetToken")
    assert (status, error["code"]) == (403, "permission_denied")
    with BrokerClient(broker.socket_path) as client:  # the user's own tools still work
        assert client.get_token().account == "user:1001"


def test_another_uid_is_closed_before_any_answer(broker: DaemonProcess) -> None:
    user = other_user()
    for opened in (broker.socket_path.parent.parent, broker.socket_path.parent):
        opened.chmod(0o711)
    broker.socket_path.chmod(0o666)
    entry = pwd.getpwnam(user)
    done = subprocess.run(
        ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
         "curl", "-s", "-w", "%{http_code}", "--unix-socket", str(broker.socket_path),
         "-H", "Content-Type: application/json", "-d", "{}",
         f"http://broker{SERVICE}GetToken"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.stdout in ("000", ""), done.stdout  # no HTTP answer at all
    assert "access_token" not in done.stdout
    broker.expect_log(msg="refused a caller of another user")


HEAVY_IMPORTS = ("grpc", "argparse", "re", "json", "socket", "enum", "typing", "platformdirs")


def test_the_cli_token_command_loads_nothing_it_can_do_without(
    shared_broker: DaemonProcess, folder: Path
) -> None:
    """`signin-broker token` answers on the JSON path with the standard library's core alone.

    Asked as scripts ask, on the socket in $XDG_RUNTIME_DIR, it loads neither grpc nor
    argparse, re, json, socket (enum), typing or platformdirs: each is milliseconds of a
    one-shot (README, Performance).
    """
    runtime = folder / "rt"  # short: a socket's path has 107 bytes
    runtime.mkdir(mode=0o700)
    (runtime / "signin-broker").symlink_to(shared_broker.socket_path.parent)
    environment = {k: v for k, v in os.environ.items() if k != "SIGNIN_BROKER_SOCKET"}
    environment["XDG_RUNTIME_DIR"] = str(runtime)
    probe = (
        "import sys; from signin_broker.cli.main import main; code = main(sys.argv[1:]);"
        f" sys.stderr.write(' '.join(m for m in {HEAVY_IMPORTS!r} if m in sys.modules));"
        " sys.exit(code)"
    )
    with BrokerClient(shared_broker.socket_path) as client:
        expected = client.get_token().access_token
    for line in (
        ["--socket", str(shared_broker.socket_path), "token"],
        ["token", "--format", "header"],
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *line], env=environment,
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (0, ""), line
        assert done.stdout.strip().removeprefix("Authorization: Bearer ") == expected
    status, answer = json_call(str(shared_broker.socket_path), SERVICE + "GetStatus", b"{}", 10)
    assert status == 200 and json.loads(answer)["sign_in_state"] == "SIGN_IN_STATE_SIGNED_IN"
