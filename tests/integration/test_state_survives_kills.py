"""A stored session survives a SIGKILL at every step of a save.

A child process saves an account's record again and again; it is killed just before
its k-th file system call (open, fsync, rename, close: every step that can leave a
trace), for every k until it finishes unharmed. After each kill a new vault on the
same folder, as the restarted daemon opens it, must load the last saved record or the
one being saved, never report a rollback or a missing key, and leave no temporary
file behind (the key file's are swept at its next write). The same with the state
folder full, where each save goes to the journal reserved in it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault
from support.storage import filled, tmpfs

SAVES = 3
CHILD = """
import os, signal, sys
from pathlib import Path
from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault

state, kill_at, account = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[4]
vault = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
start = (vault.load(account) or {"n": 0})["n"]
calls = 0

def counted(real):
    def call(*args, **kwargs):
        global calls
        calls += 1
        if calls == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call

for name in ("open", "fsync", "fdatasync", "pwrite", "replace", "rename", "close", "unlink"):
    setattr(os, name, counted(getattr(os, name)))
for n in range(start + 1, start + 1 + int(sys.argv[3])):
    vault.save(account, {"n": n, "refresh_token": f"rt-{n}"})
    print(n, flush=True)
"""


def leftovers(state: Path) -> list[str]:
    return sorted(p.name for p in state.rglob("*.tmp"))


# The longest sub OpenID Connect allows, all ':': its state file is kept under its hash,
# its id in a file beside it, written first.
LONG_ID = "work/user:" + "%3A" * 255


@pytest.mark.parametrize("account", ["user:1001", LONG_ID])
def test_a_kill_at_any_step_of_a_save_loses_nothing_and_leaves_nothing(
    tmp_path: Path, account: str
) -> None:
    kill_at_every_step(tmp_path / "state", account)


def test_a_kill_at_any_step_of_a_save_into_the_reserved_journal_loses_nothing(
    tmp_path: Path,
) -> None:
    """The state folder full: each save is kept in the journal reserved at the first."""
    state = tmp_path / "state"
    with tmpfs(state, "2m"):
        first = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
        first.save("user:1001", {"n": 0, "refresh_token": "rt-0"})
        with filled(state):
            kill_at_every_step(state, "user:1001")
            kept = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
            assert "reserved" in kept.kept_elsewhere("user:1001")


def kill_at_every_step(state: Path, account: str) -> None:
    """Kill a child saving the account before each of its file system calls in turn."""
    kills = 0
    for kill_at in range(1, 400):  # bounded: a save is a few dozen calls
        before = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
        was = (before.load(account) or {"n": 0})["n"]
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(state), str(kill_at), str(SAVES), account],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        saved = [int(line) for line in child.stdout.split()]
        if child.returncode == 0:
            assert saved == list(range(was + 1, was + 1 + SAVES))
            break
        assert child.returncode == -9, child.stderr
        kills += 1
        last = saved[-1] if saved else was
        restarted = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
        record = restarted.load(account)  # never StateRolledBack, never a missing key
        assert "ROLLED BACK" not in restarted.description
        assert restarted.accounts() in ([], [account])
        now = 0 if record is None else record["n"]
        assert now in (last, last + 1), f"killed at call {kill_at}: saved {last}, loaded {now}"
        assert record is None or record["refresh_token"] == f"rt-{now}"
        assert leftovers(state / "accounts") == [], f"killed at call {kill_at}"
    else:
        raise AssertionError("the child never finished its saves")
    assert leftovers(state) == []  # the key file's too, once a key is written again
    assert kills >= 3 * SAVES, kills  # every save was cut at several of its steps


def two_saves(state: Path) -> tuple[Path, bytes, bytes]:
    """An account saved twice: its state file, and the bytes of each generation."""
    vault = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
    vault.save("user:1001", {"n": 1})
    path = state / "accounts" / "user%3A1001.state"
    older = path.read_bytes()
    vault.save("user:1001", {"n": 2})
    return path, older, path.read_bytes()


def test_a_newer_save_cut_short_before_its_rename_is_completed_at_the_next_start(
    tmp_path: Path,
) -> None:
    """The rotated refresh token it holds may be the only one the provider still accepts."""
    state = tmp_path / "state"
    path, older, newer = two_saves(state)
    path.write_bytes(older)  # as if the rename never happened
    (state / "accounts" / ".user%3A1001.state.0123456789abcdef.tmp").write_bytes(newer)
    (state / "accounts" / ".user%3A1001.state.fedcba9876543210.tmp").write_bytes(newer[:30])
    restarted = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
    assert restarted.load("user:1001") == {"n": 2}
    assert leftovers(state) == []


def test_an_older_copy_put_in_place_is_still_refused_whatever_lies_beside_it(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    path, older, _ = two_saves(state)
    path.write_bytes(older)  # a backup put back
    (state / "accounts" / ".user%3A1001.state.0123456789abcdef.tmp").write_bytes(older)
    restarted = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
    assert "ROLLED BACK: user:1001" in restarted.description
    assert leftovers(state) == []
    assert json.dumps(restarted.accounts()) == '["user:1001"]'
