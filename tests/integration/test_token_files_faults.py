"""Token files under faults: SIGKILLs mid-write, restarts, a full or read-only state folder, a
stepped wall clock.

A hundred daemons are forked on the same state and files (support/killing.py), each
killed at one step of its writes in the token folder (the open of the temporary file,
its fsync, the rename, the folder's fsync), before or after the step, while a reader
reads every file over and over: every read that finds a file parses, in each format,
and the next start writes them all again and sweeps what a kill left. With the state
folder full, then read-only, renewals go on (store/journal.py) and so do the files; with
the daemon's wall clock stepped forward and back (libfaketime) too: every token a file
holds is one the provider honours, and each fault sees the files renewed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from signin_broker_testing import StubProvider
from support.clocks import faked_clock
from support.killing import DaemonForks
from support.signin import signed_in_daemon
from support.storage import filled, read_only, tmpfs
from support.token_files import FORMATS, Reader, config, held
from support.waiting import eventually

KILLS = int(os.environ.get("SIGNIN_BROKER_TEST_KILLS", "100"))
STEPS = 16  # write steps under the token folder at a start: 4 files, each open, 2 fsyncs, rename
TTL = 10  # a renewal comes 2.5 s or more before expiry: time to renew and write four files
# (each fsynced, with its folder), however busy the machine and its disk


def four_files(folder: Path) -> tuple[Path, dict[Path, str]]:
    """A config keeping a file in each format in folder/tokens: its path, and the files."""
    tokens = folder / "tokens"
    files = {tokens / form: form for form in FORMATS}
    tables = {form: {"path": str(path), "format": form} for path, form in files.items()}
    return config(folder / "files.toml", tables), files


def alive(pid: int) -> bool:
    """Whether the fork runs (not ended, nor a zombie its parent has yet to reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone while it was read
        return False


def inodes(files: dict[Path, str]) -> dict[Path, int]:
    """Each file's inode now (0: not there): a write replaces the file, so its inode changes."""
    found = {}
    for path in files:
        try:
            found[path] = path.stat().st_ino
        except FileNotFoundError:
            found[path] = 0
    return found


def all_written(files: dict[Path, str], before: dict[Path, int]) -> bool:
    """Whether every file was written since `before` (inodes() then)."""
    now = inodes(files)
    return all(now[path] not in (0, before[path]) for path in files)


def test_a_hundred_kills_mid_write_never_leave_a_partial_or_empty_file(
    socket_path: Path, folder: Path
) -> None:
    conf, files = four_files(folder)
    tokens = folder / "tokens"
    killed_at = {"before": 0, "after": 0, "at random": 0}
    with StubProvider(access_token_ttl=3600) as stub:
        signed_in_daemon(stub, socket_path).stop()
        forks = DaemonForks(socket_path, "--issuer", stub.issuer, "--config", str(conf))
        try:
            with Reader(files) as reader:
                looped = time.monotonic()
                for kill in range(KILLS):
                    when, at = ("before", "after")[kill % 2], 1 + (kill // 2) % STEPS
                    before = inodes(files)
                    pid = forks.start([tokens], when, at)
                    deadline = time.monotonic() + 30
                    while alive(pid) and not all_written(files, before):
                        assert time.monotonic() < deadline, f"kill {kill}: neither died nor wrote"
                        time.sleep(0.002)
                    if alive(pid):  # past its last write step: killed at once
                        when = "at random"
                    assert forks.ended(pid, kill=alive(pid)) == -signal.SIGKILL, f"kill {kill}"
                    killed_at[when] += 1
                    for path, form in files.items():  # whole, or not there
                        assert not path.exists() or held(path, form), f"kill {kill}: {path}"
                    assert reader.bad == [], f"kill {kill} ({when} step {at}): {reader.bad[:3]}"
                looped = time.monotonic() - looped
            before = inodes(files)
            pid = forks.start()  # a last start: every file whole, nothing left of the kills
            eventually(lambda: all_written(files, before), "the files written")
            os.kill(pid, signal.SIGTERM)
            assert forks.ended(pid) == 0
        finally:
            forks.close()
        assert all(stub.access_token_info(held(path, form)) for path, form in files.items())
    assert sorted(p.name for p in tokens.iterdir()) == sorted(path.name for path in files)
    assert reader.reads > KILLS and killed_at["before"] + killed_at["after"] >= KILLS // 2
    print(f"{KILLS} kills {killed_at} in {looped:.1f} s, {reader.reads} reads")


def honoured_throughout(stub: StubProvider, files: dict[Path, str], seconds: float) -> set[str]:
    """Read every file for `seconds`: each token read is active at the stub; the tokens read."""
    seen: set[str] = set()
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:  # bounded: `seconds`
        for path, form in files.items():
            token = held(path, form)
            info = stub.access_token_info(token)
            assert info is not None and info["active"], f"{path} holds a dead token"
            seen.add(token)
        time.sleep(0.1)
    return seen


def test_the_files_keep_being_written_with_the_state_folder_full_read_only_and_the_clock_stepped(
    socket_path: Path, folder: Path
) -> None:
    """Each fault a token lifetime long, one after the other, on one daemon."""
    conf, files = four_files(folder)
    state, clock = socket_path.parent / "state", folder / "clock"
    env = faked_clock(clock, "+0")
    with tmpfs(state, "4m"), StubProvider(access_token_ttl=TTL) as stub:
        daemon = signed_in_daemon(stub, socket_path, "--config", str(conf), env=env)
        eventually(lambda: all(path.exists() for path in files), "the files written")
        seen = {}  # a renewal comes within a lifetime: each fault sees one
        with filled(state):
            seen["full"] = honoured_throughout(stub, files, TTL)
        with read_only(state):
            seen["read-only"] = honoured_throughout(stub, files, TTL)
        for step in ("+10m", "+0"):  # NTP steps the clock forward, then back
            clock.write_text(step + "\n")
            seen[step] = honoured_throughout(stub, files, TTL)
        daemon.stop()
    assert all(len(tokens) >= 2 for tokens in seen.values()), seen.keys()
