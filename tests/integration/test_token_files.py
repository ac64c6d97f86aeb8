"""Token files: an account's token kept fresh in a file, for programs that only read files.

The daemon writes each `[token_files.<name>]` whole (0600, write, fsync, rename) before
the token it holds is due, in the format asked for, one audit row per write; it
removes the file within a second of the session's end (sign-out, a revocation it
sees, the account's removal) and when the policy denies `file:<name>`; it refuses a
folder reached through a symlink or that others can write to, saying why in status,
while apps keep getting tokens. Each test starts its own daemon: it signs out, changes
the policy or the folders. (test_token_file_readers.py: Prometheus and curl read them;
test_token_files_faults.py: kills, restarts, a full or read-only state folder, a
stepped clock.)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient, EventKind
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.commands import signin_broker
from support.events import watching
from support.signin import signed_in_daemon
from support.token_files import FORMATS, Reader, config, held
from support.waiting import eventually

TTL = 2  # seconds: a renewal every second and a half or so


def test_each_format_holds_a_token_the_provider_honours_renewed_under_a_reader(
    socket_path: Path, folder: Path
) -> None:
    tokens = folder / "tokens"
    files = {form: {"path": str(tokens / form), "format": form} for form in FORMATS}
    conf = config(folder / "files.toml", files)
    with StubProvider(access_token_ttl=TTL) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--config", str(conf))
        paths = {tokens / form: form for form in FORMATS}
        with Reader(paths) as reader:
            eventually(lambda: len(reader.tokens) >= 3, "three renewals read", timeout=20)
        assert reader.bad == [] and reader.reads > 50
        for path, form in paths.items():
            assert path.stat().st_mode & 0o777 == 0o600
            assert stub.access_token_info(held(path, form))["active"]  # type: ignore[index]
        shown = json.loads(signin_broker("--socket", str(socket_path), "status", "--json").stdout)
        listed = {file["name"]: file for file in shown["token_files"]}
        assert set(listed) == set(FORMATS)
        for file in listed.values():
            assert file["account"] == "user:1001" and file["problem"] == ""
            assert time.time() - 5 < file["written_at_unix"] <= file["next_write_unix"]
        daemon.stop()  # its audit writer writes what is queued; the files are no more written
        written = [r["token_file"] for r in daemon.logs_with(msg="token file written")]
        with (
            DaemonProcess(socket_path, "--issuer", stub.issuer),
            BrokerClient(socket_path) as client,
        ):
            for form in FORMATS:  # one audit row per write, none per read
                rows = client.audit_events(app=f"file:{form}", limit=500)
                writes = [
                    r for r in rows if (r.resource, r.action) == ("token_file", "issue_token")
                ]
                assert len(writes) == written.count(form) >= 3
                assert all(r.times == 1 and r.target_account == "user:1001" for r in writes)


@pytest.mark.parametrize("end", ["sign-out", "revocation", "removal"])
def test_the_file_is_gone_within_a_second_of_the_sessions_end(
    socket_path: Path, folder: Path, end: str
) -> None:
    path = folder / "tokens" / "api"
    conf = config(folder / "files.toml", {"api": {"path": str(path)}})
    with StubProvider(access_token_ttl=60) as stub:
        daemon = signed_in_daemon(
            stub, socket_path, "--config", str(conf), "--revalidate-seconds", "1"
        )
        eventually(path.exists, "the file written")
        cli = ("--socket", str(socket_path))
        with watching(socket_path) as events:
            if end == "sign-out":
                assert signin_broker(*cli, "logout").returncode == 0
                ended = time.monotonic()
            elif end == "removal":
                assert signin_broker(*cli, "accounts", "remove", "user:1001").returncode == 0
                ended = time.monotonic()
            else:
                stub.revoke_user("1001")
                events.wait_for(EventKind.REVOKED, timeout=10)  # seen at the next check
                ended = time.monotonic()
            eventually(lambda: not path.exists(), "the file removed", timeout=5, every=0.01)
            assert time.monotonic() - ended < 1.0
        with BrokerClient(socket_path) as client:  # then its keeper looks: sign in again
            (file,) = eventually(
                lambda: [f for f in client.status().token_files if "not signed in" in f.problem],
                "status saying why",
            )
        assert file.expires_at_unix == 0 and file.written_at_unix
        daemon.stop()


def test_a_folder_reached_through_a_symlink_or_open_to_others_is_refused_saying_why(
    socket_path: Path, folder: Path, execd_daemons: None
) -> None:
    """Said in status and by the doctor (the daemon's own check of each folder too)."""
    real = folder / "real"
    real.mkdir(mode=0o700)
    (folder / "linked").symlink_to(real)
    shared = folder / "shared"
    shared.mkdir(mode=0o770)
    shared.chmod(0o770)  # group-writable, whatever the umask
    files = {
        "linked": {"path": str(folder / "linked" / "api")},
        "shared": {"path": str(shared / "api")},
    }
    conf = config(folder / "files.toml", files)
    with StubProvider(access_token_ttl=60) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--config", str(conf))
        with BrokerClient(socket_path) as client:

            def refused_for_their_folders() -> dict[str, str] | None:
                """Until the sign-in's event reaches a file's keeper, its problem is the
                account's; the lasting one is its folder's, once it tried to write."""
                found = {
                    f.name: f.problem
                    for f in client.status().token_files
                    if f.problem.startswith("cannot write")
                }
                return found if len(found) == len(files) else None

            problems = eventually(refused_for_their_folders, "both refused for their folders")
            assert "reached through the symlink" in problems["linked"]
            assert "can be written by other users (mode 0770)" in problems["shared"]
            assert "chmod go-w" in problems["shared"]
            assert client.get_token().access_token  # apps are served all the same
            doctor = signin_broker("--socket", str(socket_path), "doctor", "--json", timeout=60)
            found = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "tokens"]
            named = {(f["name"], f["status"]) for f in found if "symlink" in f["seen"]}
            assert named == {("token file linked", "fail")}, found  # the daemon's, and its check
            assert len([f for f in found if "mode 0770" in f["seen"]]) == 2, found
            assert not (real / "api").exists() and not (shared / "api").exists()
            shared.chmod(0o750)  # fixed: the next try writes it
            eventually((shared / "api").exists, "the file written once fixed", timeout=10)
            assert held(shared / "api", "token") == client.get_token().access_token
        daemon.stop()


def test_the_policy_decides_for_a_file_as_for_an_app(socket_path: Path, folder: Path) -> None:
    path = folder / "tokens" / "api"
    conf = config(folder / "files.toml", {"api": {"path": str(path)}})
    with StubProvider(access_token_ttl=60) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--config", str(conf))
        eventually(path.exists, "the file written")
        cli = ("--socket", str(socket_path))
        assert signin_broker(*cli, "apps", "deny", "file:api").returncode == 0
        eventually(lambda: not path.exists(), "the file removed", timeout=5, every=0.05)
        with BrokerClient(socket_path) as client:
            (file,) = client.status().token_files
            assert "policy denies file:api" in file.problem
            assert signin_broker(*cli, "apps", "allow", "file:api").returncode == 0
            eventually(path.exists, "the file written again", timeout=5, every=0.05)
            assert held(path, "token") == client.get_token().access_token
        daemon.stop()


def test_an_account_whose_tokens_are_dpop_bound_gets_no_file_and_status_says_why(
    socket_path: Path, folder: Path
) -> None:
    """A file cannot hold a proof for each request: a bound token there would be useless."""
    path = folder / "tokens" / "api"
    conf = config(folder / "files.toml", {"api": {"path": str(path)}})
    with StubProvider(dpop=True) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--config", str(conf), "--dpop", "auto")
        with BrokerClient(socket_path) as client:
            assert client.get_token().token_type == "DPoP"
            (file,) = eventually(
                lambda: [f for f in client.status().token_files if f.problem], "the refusal said"
            )
        assert "bound to the daemon's DPoP key" in file.problem and not path.exists()
        daemon.stop()
