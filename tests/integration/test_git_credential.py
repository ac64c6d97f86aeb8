"""git, the real one, clones from a loopback forge with a token the broker hands its helper.

`git config credential.<url>.helper "signin-broker ..."` makes git run
`git-credential-signin-broker`; the forge takes the token as the Basic password and
checks it with the provider, as a forge taking OAuth tokens does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import BIN
from support.git_server import GitServer, bare_repository, git
from support.signin import signed_in_daemon
from support.tokens import access_token

HELPER = str(BIN / "git-credential-signin-broker")


def test_git_clones_with_the_token_the_daemon_serves(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    bare_repository(folder, "project")
    with GitServer(folder, stub) as server:
        cloned = git(folder, socket_path, server, "clone", f"{server.url}/project.git", "copy")
        assert cloned.returncode == 0, cloned.stderr
        assert (folder / "copy" / "README").read_text() == "hello from the loopback forge\n"
        assert set(server.seen) == {("someone", access_token(socket_path))}
    daemon.stop()


def test_a_refused_token_is_erased_renewed_and_the_next_fetch_carries_the_new_one(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    bare_repository(folder, "project")
    with GitServer(folder, stub) as server:
        first = access_token(socket_path)
        server.refuse.add(first)  # as after a revocation the broker has not seen yet
        refreshes = len(stub.token_requests("refresh_token"))
        refused = git(folder, socket_path, server, "clone", f"{server.url}/project.git", "copy")
        assert refused.returncode != 0
        assert len(stub.token_requests("refresh_token")) == refreshes + 1  # erase renewed it
        renewed = access_token(socket_path)
        assert renewed != first
        again = git(folder, socket_path, server, "clone", f"{server.url}/project.git", "copy")
        assert again.returncode == 0, again.stderr
        assert server.seen[-1] == ("someone", renewed)
    daemon.stop()


def test_without_a_session_git_fails_cleanly_with_the_reason(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = DaemonProcess(socket_path, "--issuer", stub.issuer).start()
    bare_repository(folder, "project")
    with GitServer(folder, stub) as server:
        failed = git(folder, socket_path, server, "clone", f"{server.url}/project.git", "copy")
    assert failed.returncode != 0 and not server.seen
    assert "not signed in" in failed.stderr and "Traceback" not in failed.stderr
    daemon.stop()


def helper(socket_path: Path, operation: str, request: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HELPER, "--socket", str(socket_path), operation],
        input=request, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_get_answers_the_protocol_and_never_sends_a_token_over_plain_http(
    stub: StubProvider, socket_path: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    token = access_token(socket_path)
    answer = helper(socket_path, "get", "protocol=https\nhost=git.example.com\n\n")
    lines = dict(line.split("=", 1) for line in answer.stdout.splitlines())
    assert (lines["username"], lines["password"]) == ("oauth2", token)
    with BrokerClient(socket_path) as client:
        assert int(lines["password_expiry_utc"]) == client.get_token().expires_at_unix
    remote_http = helper(socket_path, "get", "protocol=http\nhost=git.example.com\n\n")
    assert (remote_http.returncode, remote_http.stdout) == (0, "")
    assert helper(socket_path, "store", "protocol=https\nhost=x\npassword=y\n\n").stdout == ""
    flood = helper(socket_path, "get", "x" * (65 * 1024))
    assert flood.returncode == 2 and flood.stdout == "" and "larger than" in flood.stderr
    daemon.stop()
