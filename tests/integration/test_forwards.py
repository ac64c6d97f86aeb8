"""Forwards: the broker's tokens through `ssh -R` and into namespaces, nothing more.

One provider, one signed-in daemon (Alice, the default, and Bob) and one real sshd for
the module. The far side is the wheel's CLI alone with SIGNIN_BROKER_SOCKET pointing at
the forwarded socket: inside an SSH session to Debian's sshd on a loopback port, and in
a process with mount and PID namespaces of its own where only the forward's socket is
bind-mounted (a container's view). Everything the far side receives is scanned for the
secrets the stub issued: only the access tokens it was given may be there.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from signin_broker.client import BrokerClient, BrokerError, DaemonNotRunning
from signin_broker_testing import StubProvider, processes
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir
from signin_broker_testing.ledger import SecretLedger
from support.accounts import ALICE, ALICE_ID, BOB, BOB_ID, daemon_with_accounts
from support.commands import BIN, curl_json, signin_broker
from support.identity import Script, namespaces_available
from support.leaks import SecretIndex
from support.memory import MB, resident_bytes
from support.other_user import other_user, run_as
from support.real import unavailable
from support.waiting import eventually

SCOPES = "openid profile email read"
REFUSED = "not available through a forward"
HOST_ONLY = (["login", "--no-browser"], ["apps"], ["audit"], ["logout"], ["accounts"])


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProvider]:
    with StubProvider(users=[ALICE, BOB], auto_approve=ALICE.sub) as provider:
        yield provider


@pytest.fixture(scope="module")
def host(stub: StubProvider) -> Iterator[DaemonProcess]:
    """The daemon on the host: Alice (the default) and Bob signed in, scope `read` granted."""
    folder = short_temp_dir()
    daemon = daemon_with_accounts(
        stub, folder / "run" / "broker.sock", "--scopes", SCOPES, workspace=False
    )
    yield daemon
    daemon.stop()
    shutil.rmtree(folder, ignore_errors=True)


def on_host(host: DaemonProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return signin_broker("--socket", str(host.socket_path), *args)


def open_forward(host: DaemonProcess, name: str, *flags: str) -> Path:
    """Open a forward on the host; the path `forward` prints."""
    opened = on_host(host, "forward", "--name", name, "--ttl", "300", *flags)
    assert opened.returncode == 0, opened.stderr
    return Path(opened.stdout.strip())


class FarSide:
    """The far side's runs of the CLI, and everything they received."""

    def __init__(self, command: list[str]) -> None:
        self._command = command  # what runs `signin-broker ARGS` over there
        self.received: list[str] = []
        self.given: set[str] = set()  # the access tokens it was handed

    def run(self, *args: str, given: str = "") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self._command, str(BIN / "signin-broker"), *args],
            input=given,
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.received += [done.stdout, done.stderr]
        return done

    def token(self, *args: str) -> dict[str, object]:
        done = self.run("token", "--json", *args)
        assert done.returncode == 0, done.stderr
        issued: dict[str, object] = json.loads(done.stdout)
        self.given.add(str(issued["access_token"]))
        return issued

    def assert_only_tools_of_the_host_refused(self) -> None:
        for command in HOST_ONLY:
            done = self.run(*command)
            assert done.returncode == 1, (command, done.stdout, done.stderr)
            assert "permission_denied" in done.stderr and REFUSED in done.stderr, done.stderr
        bob = self.run("token", "--account", BOB_ID)
        assert bob.returncode == 1 and "not_found" in bob.stderr, bob.stderr
        id_token = self.run("token", "--id-token")
        assert id_token.returncode == 1 and "permission_denied" in id_token.stderr

    def secrets_received(self) -> list[str]:
        """The stub's secrets (refresh and ID tokens, codes, others' tokens) found over there."""
        others = SecretIndex(SecretLedger.secrets() - self.given)
        return others.found_in("\n".join(self.received))


def accepted_at_userinfo(stub: StubProvider, token: str) -> str:
    """The sub the provider's userinfo endpoint names for a bearer token."""
    endpoint = httpx2.get(stub.discovery_url, timeout=10).json()["userinfo_endpoint"]
    answer = httpx2.get(endpoint, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["sub"])


def assert_the_host_is_untouched(host: DaemonProcess) -> None:
    with BrokerClient(host.socket_path) as client:
        assert {account.id for account in client.accounts()} == {ALICE_ID, BOB_ID}


# -- SSH ------------------------------------------------------------------------------------


class Sshd:
    """Debian's sshd on a loopback port, run by the test with its own keys and config.

    It logs in as the user running the tests (an sshd of a normal user can only do so).
    """

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("sshd") or "/usr/sbin/sshd"
        if not Path(binary).exists():
            unavailable("sshd is not installed (Debian's openssh-server)")
        self.folder = folder
        for key in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)],
                check=True,
                timeout=30,
            )
        (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        (folder / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
            f"PidFile {folder / 'sshd.pid'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            "StrictModes no\nPermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n"
            "StreamLocalBindUnlink yes\nLogLevel ERROR\n"
        )
        if os.geteuid() == 0:  # root's sshd separates privileges into this folder
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(folder / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        eventually(self._listening, "sshd listens", timeout=20, every=0.05)

    def _listening(self) -> bool:
        assert self.process.poll() is None, self.process.communicate()[1]
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def ssh(self, *args: str) -> list[str]:
        return [
            "ssh", "-F", "/dev/null", "-p", str(self.port), "-i", str(self.folder / "client_key"),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-S", str(self.folder / "control"), *args, f"{getpass.getuser()}@127.0.0.1",
        ]  # fmt: skip

    @contextlib.contextmanager
    def session(self, remote: Path, forward: Path) -> Iterator[FarSide]:
        """An SSH session forwarding `remote` to the forward's socket, as the README says.

        A master connection holds the `-R` forward; each far-side command runs in a
        session of its own over it, with SIGNIN_BROKER_SOCKET set to the remote path.
        """
        log = self.folder / "master.log"  # a file: a pipe nobody reads could stall ssh
        with log.open("w") as stderr:
            master = subprocess.Popen(
                self.ssh("-M", "-N", "-o", "ExitOnForwardFailure=yes", "-R", f"{remote}:{forward}"),
                stderr=stderr,
            )
        try:
            eventually(
                lambda: remote.is_socket() or master.poll() is not None,
                "the remote end of ssh -R",
                timeout=20,
            )
            assert master.poll() is None, log.read_text()
            yield FarSide([*self.ssh(), "env", f"SIGNIN_BROKER_SOCKET={remote}"])
        finally:  # ssh's own exit: a SIGKILL past 10 s is no failure of the broker
            processes.stop(master, 10)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    folder = short_temp_dir()
    server = Sshd(folder)
    yield server
    server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_through_ssh_the_far_side_gets_tokens_and_nothing_else(
    stub: StubProvider, host: DaemonProcess, sshd: Sshd
) -> None:
    forward = open_forward(host, "ssh")
    assert forward == host.socket_path.parent / "forwards" / "ssh.sock"
    assert forward.stat().st_mode & 0o777 == 0o600
    remote = sshd.folder / "far" / "broker.sock"
    remote.parent.mkdir()
    with sshd.session(remote, forward) as far:
        status = far.run("status")
        assert status.returncode == 0, status.stderr
        assert "ssh of signin-broker on" in status.stdout
        assert str(host.socket_path) not in status.stdout  # nothing of the host's
        issued = far.token()
        assert issued["account"] == ALICE_ID
        assert accepted_at_userinfo(stub, str(issued["access_token"])) == ALICE.sub
        far.assert_only_tools_of_the_host_refused()
        assert_the_host_is_untouched(host)
        assert far.secrets_received() == []

        # Closing refuses at once: an open connection, and the next request.
        with BrokerClient(remote, timeout=5) as client:
            assert client.get_token(scopes=["email"], app_hint="far-app on box").scopes == (
                "email",
            )
            closed = on_host(host, "forward", "--close", "ssh")
            assert closed.returncode == 0, closed.stderr
            refused_from = time.monotonic()
            with pytest.raises(BrokerError):
                client.get_token()
            assert time.monotonic() - refused_from < 1
        assert far.run("token").returncode != 0
        assert not forward.exists()

    # The audit names the forward; what the far side said of itself is a hint beside it.
    rows = json.loads(on_host(host, "audit", "--json", "--app", "forward:ssh").stdout)
    hints = {row["payload"].get("hint", "") for row in rows if row["action"] == "issue_token"}
    assert any(hint.startswith("says 'far-app on box', peer /") for hint in hints), rows
    assert all("peer" in hint for hint in hints), hints


# -- a container's view: mount and PID namespaces of its own ---------------------------------


def boxed(host: DaemonProcess, forward: Path, box: Path) -> list[str]:
    """A command prefix: a process in new mount and PID namespaces that sees the forward only.

    A fresh tmpfs holds the forward's socket, bind-mounted as broker.sock (as `docker run
    -v` does), and an empty tmpfs hides the daemon's own socket folder.
    """
    root = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    script = (
        'mount -t tmpfs none "$0" && : > "$0/broker.sock" && mount --bind "$1" "$0/broker.sock"'
        ' && mount -t tmpfs none "$2" && shift 2 && SIGNIN_BROKER_SOCKET="$0/broker.sock" exec "$@"'
    )
    run = host.socket_path.parent
    return ["unshare", *root, "--mount", "--pid", "--fork", "sh", "-c", script, str(box),
            str(forward), str(run)]  # fmt: skip


@pytest.fixture
def box(folder: Path) -> Path:
    namespaces_available(*([] if os.geteuid() == 0 else ["-Ur"]), "--mount", "--pid", "--fork")
    (folder / "box").mkdir()
    return folder / "box"


def test_a_namespaced_process_with_only_the_forward_gets_down_scoped_tokens(
    stub: StubProvider, host: DaemonProcess, box: Path, folder: Path
) -> None:
    mine = folder / "mine"
    mine.mkdir(mode=0o700)
    forward = open_forward(host, "box", "--scope", "read", "--forward-socket", str(mine / "b.sock"))
    assert forward == mine / "b.sock" and forward.stat().st_mode & 0o777 == 0o600
    far = FarSide(boxed(host, forward, box))
    status = far.run("status")
    assert "box of signin-broker on" in status.stdout and "read" in status.stdout, status.stderr
    issued = far.token()
    assert issued["scopes"] == ["read"]
    info = stub.access_token_info(str(issued["access_token"]))
    assert info is not None and info["scope"] == "read"
    git = far.run("git-credential", "get", given="protocol=https\nhost=git.example.com\n\n")
    assert git.returncode == 0 and "password=" in git.stdout, git.stderr
    far.given.add(git.stdout.split("password=")[1].split()[0])
    wider = far.run("token", "--scope", "openid")
    assert wider.returncode == 1 and "permission_denied" in wider.stderr
    far.assert_only_tools_of_the_host_refused()
    assert far.secrets_received() == []
    assert_the_host_is_untouched(host)

    assert on_host(host, "forward", "--close", "box").returncode == 0
    assert far.run("token").returncode != 0
    assert not forward.exists()

    # A scope the account was never granted gives nothing, never the sign-in's whole token.
    ungranted = open_forward(host, "ungranted", "--scope", "offline_access")
    refused = FarSide(["env", f"SIGNIN_BROKER_SOCKET={ungranted}"]).run("token")
    assert refused.returncode == 1 and "failed_precondition" in refused.stderr, refused.stderr
    on_host(host, "forward", "--close", "ungranted")


def test_with_confirm_a_boxed_request_waits_for_the_persons_answer(
    host: DaemonProcess, box: Path
) -> None:
    forward = open_forward(host, "ask", "--confirm")
    waiting = subprocess.Popen(
        [*boxed(host, forward, box), str(BIN / "signin-broker"), "token"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(
            lambda: any(
                app["id"] == "forward:ask" and app["waiting"]
                for app in json.loads(on_host(host, "apps", "--json").stdout)["apps"]
            ),
            "forward:ask waits for an answer",
            timeout=30,
        )
        assert waiting.poll() is None
        lasting = on_host(host, "apps", "allow", "forward:ask")
        assert lasting.returncode == 1 and "--once" in lasting.stderr  # its policy is fixed
        assert on_host(host, "apps", "allow", "--once", "forward:ask").returncode == 0
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert out.strip()
    on_host(host, "forward", "--close", "ask")


def test_a_step_up_is_served_through_a_forward_when_met_but_never_begun_there(
    host: DaemonProcess,
) -> None:
    forward = open_forward(host, "stepped")
    with BrokerClient(forward) as far:
        met = far.get_token(acr_values="urn:stub:acr:pwd")  # what the sign-in has
        assert met.acr == "urn:stub:acr:pwd"
        began = time.monotonic()
        with pytest.raises(BrokerError) as refused:
            far.get_token(acr_values="urn:stub:acr:mfa")
    assert refused.value.code.name == "FAILED_PRECONDITION"
    assert "never begins through a forward" in refused.value.message
    assert "signin-broker token --account user:" in refused.value.message
    assert time.monotonic() - began < 10  # refused, not left waiting for the person
    on_host(host, "forward", "--close", "stepped")


def test_a_forward_closes_by_its_ttl_and_with_the_daemon(daemon: DaemonProcess) -> None:
    """Neither needs a sign-in: a forward of every account can be open before any."""

    def opened(name: str, ttl: str) -> Path:
        done = signin_broker(
            "--socket", str(daemon.socket_path), "forward", "--name", name, "--ttl", ttl,
            "--all-accounts",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return Path(done.stdout.strip())

    brief = opened("brief", "1")
    assert brief.is_socket()
    eventually(lambda: not brief.exists(), "the forward's TTL closes it", timeout=10, every=0.1)
    with BrokerClient(daemon.socket_path) as client:
        assert client.forwards() == []
        lasting = opened("lasting", "300")
        assert [f.name for f in client.forwards()] == ["lasting"]
        with BrokerClient(lasting, timeout=5) as through:
            assert through.status().forward is not None
            daemon.stop()
            with pytest.raises((BrokerError, DaemonNotRunning)):
                through.status()
    assert not lasting.exists()


def test_another_user_is_refused_by_a_forward_as_by_the_daemon(daemon: DaemonProcess) -> None:
    """Its socket is 0600 in a 0700 folder; opened up by mistake, the uid check still holds."""
    user = other_user()
    opened = signin_broker(
        "--socket", str(daemon.socket_path), "forward", "--name", "shut", "--all-accounts"
    )
    forward = Path(opened.stdout.strip())
    assert run_as(user, forward, "connect") == {"connected": False, "errno": errno.EACCES}
    for folder in (forward.parents[2], forward.parents[1], forward.parent):
        folder.chmod(0o711)
    forward.chmod(0o666)
    assert run_as(user, forward, "connect") == {"connected": True}
    assert run_as(user, forward, "status")["code"] == "UNAVAILABLE"  # closed unread
    refusals = daemon.expect_log(msg="refused a caller of another user")
    assert refusals[0]["caller_uid"] == pwd.getpwnam(user).pw_uid


def test_a_call_a_forward_refuses_is_forbidden_whatever_its_body(host: DaemonProcess) -> None:
    """A refused call is 403 whatever its body: with an unknown field it once got 400, over
    64 KiB 413, and with none sent it waited for it (no answer in 3 s). It is refused on its
    head now, before a byte of the body is read."""
    forward = open_forward(host, "json")
    try:
        for body in ("{}", '{"no_such_field": 1}', "not json", "x" * (70 * 1024)):
            code, answer = curl_json(forward, "ListAccounts", body)
            assert (code, answer["code"]) == (403, "permission_denied"), (body[:20], answer)
            assert REFUSED in answer["error"]
        with socket.socket(socket.AF_UNIX) as caller:
            caller.settimeout(2)  # bounded: it once waited for the body for good
            caller.connect(str(forward))
            caller.sendall(
                b"POST /signin_broker.v1.TokenBroker/ListAccounts HTTP/1.1\r\nHost: b\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            )
            assert caller.recv(12) == b"HTTP/1.1 403"
        code, answer = curl_json(forward, "GetToken", '{"no_such_field": 1}')
        assert (code, answer["code"]) == (400, "invalid_argument")  # a call it serves: read
    finally:
        on_host(host, "forward", "--close", "json")


FLOOD_PROCESSES, EACH = 16, 64  # 1,024 connections, each with most of a 64 KiB body


def test_memory_a_flood_took_through_a_forward_is_given_back(
    host: DaemonProcess, folder: Path
) -> None:
    """The daemon gives back what a burst of connections freed (host/memory.py), on a
    forward's socket as on its own: a forward once kept it (58 MB became 343 MB for good)."""
    forward = open_forward(host, "flooded")
    try:
        before = resident_bytes(host.pid)
        flood = Script(folder / "apps", "flood", JSON_FLOOD)
        flood.run(str(forward), str(FLOOD_PROCESSES), str(EACH))
        eventually(
            lambda: resident_bytes(host.pid) < before + 15 * MB,
            f"memory given back to {before // MB} MB + 15 (now {resident_bytes(host.pid) // MB})",
            timeout=15,
        )
    finally:
        on_host(host, "forward", "--close", "flooded")


# Processes of connections, each sending a token request's head and all but the end of a
# 64 KiB body (so the daemon holds it), then, once all are sent, closing them all.
JSON_FLOOD = r"""
import json, os, socket, sys

socket_path, processes, each = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
head = (b"POST /signin_broker.v1.TokenBroker/GetToken HTTP/1.1\r\nHost: b\r\n"
        b"Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n")
sent_read, sent_write = os.pipe()
go_read, go_write = os.pipe()
children = []
for _ in range(processes):
    pid = os.fork()
    if pid == 0:
        os.close(go_write)  # only the parent's end: its close is the signal
        held = []
        for _ in range(each):
            conn = socket.socket(socket.AF_UNIX)
            try:
                conn.connect(socket_path)
                conn.sendall(head + b" " * 65000)
            except OSError:
                conn.close()
                continue
            held.append(conn)
        os.write(sent_write, b"x")
        os.read(go_read, 1)  # until the parent says so: every child has sent
        os._exit(0)
    children.append(pid)
for _ in children:
    os.read(sent_read, 1)
os.close(go_write)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({"processes": len(children)}))
"""


def test_a_relative_forward_socket_is_where_the_shell_names_it_from_the_commands_folder(
    host: DaemonProcess, folder: Path
) -> None:
    """A relative path is from the folder `forward` runs in, never the daemon's, and joined
    as the kernel reads it: `link/../c.sock` is beside link's target, reached by a symlink."""
    here, there = folder / "here", folder / "there"
    here.mkdir(mode=0o700)
    (there / "inner").mkdir(mode=0o700, parents=True)
    there.chmod(0o700)
    (here / "link").symlink_to(there / "inner")

    def forward(name: str, path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "signin-broker"), "--socket", str(host.socket_path), "forward",
             "--name", name, "--ttl", "60", "--forward-socket", path],
            cwd=here, capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    opened = forward("here", "b.sock")
    assert opened.returncode == 0, opened.stderr
    assert Path(opened.stdout.strip()) == here / "b.sock" and (here / "b.sock").is_socket()
    assert on_host(host, "forward", "--close", "here").returncode == 0
    through = forward("through", "link/../c.sock")
    assert through.returncode == 1 and "through a symlink" in through.stderr, through.stderr
    assert not (here / "c.sock").exists() and not (there / "c.sock").exists()
