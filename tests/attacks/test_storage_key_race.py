"""Concurrent first sign-ins with `key_store = "file"`: every account's key must survive."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from signin_broker.store.keys import FileKeyStore
from signin_broker.store.vault import Vault

ROUNDS = 100
WRITERS = 4
PER_PROCESS = 100

# Sets PER_PROCESS keys named after argv[2] in the key file argv[1], as fast as it can.
SET_KEYS = """
import sys
from pathlib import Path
from signin_broker.store.keys import FileKeyStore
store = FileKeyStore(Path(sys.argv[1]))
for n in range(int(sys.argv[3])):
    store.set(f"user:{sys.argv[2]}-{n}:state-key", bytes([n % 256]) * 32)
"""


def race(writers: int, work: Callable[[int], None]) -> None:
    """Run work(0..writers-1) in threads released at the same moment; re-raise any failure."""
    barrier = threading.Barrier(writers)
    failures: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait(timeout=10)
        try:
            work(index)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not failures, failures


def test_concurrent_first_saves_keep_every_account_after_a_restart(folder: Path) -> None:
    for round_ in range(ROUNDS):
        state = folder / f"round-{round_}"
        state.mkdir(mode=0o700)

        def save(index: int, state: Path = state) -> None:
            vault = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
            vault.save(f"user:{index}", {"n": index})

        race(WRITERS, save)
        restarted = Vault(state / "accounts", FileKeyStore(state / "keys.json"))
        loaded = {i: restarted.load(f"user:{i}") for i in range(WRITERS)}
        assert loaded == {i: {"n": i} for i in range(WRITERS)}, f"round {round_}"


def test_concurrent_key_writes_in_threads_lose_nothing(folder: Path) -> None:
    for round_ in range(ROUNDS):
        path = folder / f"round-{round_}" / "keys.json"
        path.parent.mkdir(mode=0o700)
        race(WRITERS, lambda i, path=path: FileKeyStore(path).set(f"user:{i}:k", bytes([i]) * 32))
        fresh = FileKeyStore(path)
        assert [fresh.get(f"user:{i}:k") for i in range(WRITERS)] == [
            bytes([i]) * 32 for i in range(WRITERS)
        ], f"round {round_}"


def test_concurrent_key_writes_from_processes_lose_nothing(folder: Path) -> None:
    path = folder / "keys.json"
    writers = [
        subprocess.Popen([sys.executable, "-c", SET_KEYS, str(path), name, str(PER_PROCESS)])
        for name in ("a", "b")
    ]
    assert [writer.wait(60) for writer in writers] == [0, 0]
    store = FileKeyStore(path)
    missing = [
        f"user:{name}-{n}:state-key"
        for name in ("a", "b")
        for n in range(PER_PROCESS)
        if store.get(f"user:{name}-{n}:state-key") is None
    ]
    assert missing == []
