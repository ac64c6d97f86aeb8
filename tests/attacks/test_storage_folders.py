"""Attacks through the folders the daemon writes into: open to other users, or symlinked."""

from __future__ import annotations

import os
import pwd
import secrets
import stat
from pathlib import Path

import pytest

from signin_broker.store.files import write_atomically
from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault
from signin_broker_testing.daemon import DaemonProcess
from support.other_user import other_user
from support.storage import make_state_dir


def refused(daemon: DaemonProcess) -> str:
    """The daemon's complaint when it declines to start (exit 1 before serving)."""
    daemon.start(wait=False)
    assert daemon.wait_exit(timeout=15) == 1, daemon.output()
    assert not daemon.socket_path.exists()
    return daemon.output()


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770], ids=["world", "sticky", "group"])
def test_a_state_dir_other_users_can_write_is_refused(
    socket_path: Path, folder: Path, mode: int
) -> None:
    shared = folder / "shared"
    shared.mkdir()
    shared.chmod(mode)  # where another uid could plant a symlink at a file's temporary name
    output = refused(DaemonProcess(socket_path, "--state-dir", str(shared)))
    assert f"chmod 700 {shared}" in output
    assert stat.S_IMODE(shared.stat().st_mode) == mode  # nothing changed behind the user's back
    assert list(shared.iterdir()) == []  # nothing written into it


def test_a_state_dir_under_a_folder_other_users_can_write_is_refused(
    socket_path: Path, folder: Path
) -> None:
    open_parent = folder / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)  # another uid can rename the state folder away and plant its own
    state = open_parent / "state"
    state.mkdir(mode=0o700)
    output = refused(DaemonProcess(socket_path, "--state-dir", str(state)))
    assert str(open_parent) in output


def test_a_symlinked_accounts_folder_is_refused(socket_path: Path, folder: Path) -> None:
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (make_state_dir(socket_path) / "accounts").symlink_to(elsewhere)
    output = refused(DaemonProcess(socket_path))
    assert "symlink" in output


@pytest.mark.parametrize("which", ["state", "accounts"])
def test_state_folders_owned_by_another_user_are_refused(socket_path: Path, which: str) -> None:
    intruder = pwd.getpwnam(other_user())
    state = make_state_dir(socket_path)
    planted = state if which == "state" else state / "accounts"
    planted.mkdir(mode=0o700, exist_ok=True)
    os.chown(planted, intruder.pw_uid, intruder.pw_gid)  # made by the other user, 0700 or not
    output = refused(DaemonProcess(socket_path))
    assert f"belongs to uid {intruder.pw_uid}" in output


def test_a_symlink_planted_at_the_temporary_name_is_not_followed(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = folder / "state"
    state.mkdir(mode=0o700)
    loot = folder / "loot"
    loot.touch()
    # White-box: guess every temporary name a writer could pick, the per-process one it
    # used to take and the random one it takes now (made predictable here).
    monkeypatch.setattr(secrets, "token_hex", lambda *_: "guessed")
    for name in (f".keys.json.{os.getpid()}.tmp", ".keys.json.guessed.tmp"):
        (state / name).symlink_to(loot)
    with pytest.raises(FileExistsError):
        write_atomically(state / "keys.json", b"the owner's keys")
    assert loot.read_bytes() == b""
    assert not (state / "keys.json").exists()


def test_a_hashed_state_files_id_beside_it_cannot_name_another_account(tmp_path: Path) -> None:
    """An id too long for a file name is kept beside its state under the id's hash; an id
    written there by someone else (a planted file, a copy) is not taken for an account."""
    long_id = "user:" + "%3A" * 255
    vault = Vault(tmp_path / "accounts", FileKeyStore(tmp_path / "keys.json"))
    vault.save(long_id, {"n": 1})
    (beside,) = (tmp_path / "accounts").glob("~*.id")
    assert beside.read_text() == long_id and vault.accounts() == [long_id]
    beside.write_text("user:1001")
    assert vault.accounts() == []  # the name is not the hash of the id it claims
    beside.unlink()
    beside.symlink_to(tmp_path / "elsewhere")
    assert vault.accounts() == []
