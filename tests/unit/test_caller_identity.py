"""Caller identity's pure parts: scripts, start ticks, sandbox ids, and the connection table."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from signin_broker.daemon.api.transport import CallerConnection, ConnectionTable
from signin_broker.daemon.callers.file_system_view import NotTheDaemonsFile, running_program
from signin_broker.daemon.callers.identity import (
    MAX_FLATPAK_INFO_BYTES,
    SNAP_LABEL,
    Caller,
    UnidentifiableSandbox,
    _flatpak_app_id,
    _named_absolutely,
    _sandbox_of,
    _start_ticks,
    identify_caller,
    script_of,
)
from signin_broker.identities import AppId, AppKind
from support.identity import namespaces_available
from support.waiting import eventually

# -- the script an interpreter runs, and whether a pin may rest on its path --------------


@pytest.mark.parametrize(
    ("cmdline", "script"),
    [
        (["python3", "./app.py"], "/home/me/app.py"),
        (["python3", "/opt/a/../b/app.py"], "/opt/b/app.py"),
        (["python3", "-"], ""),  # the program comes on stdin
        (["python3", "-m"], "-m"),
        (["node", "-e", "code", "app.js"], ""),
        (["node", "--eval", "code"], ""),
        (["node", "-r", "preload", "app.js"], "/home/me/app.js"),
        (["node", "--require", "preload", "/srv/app.js"], "/srv/app.js"),
        (["python3", "--check-hash-based-pycs", "always", "app.py"], "/home/me/app.py"),
    ],
)
def test_the_script_of_more_command_lines(cmdline: list[str], script: str) -> None:
    assert script_of(cmdline, "/home/me") == script


@pytest.mark.parametrize(
    ("cmdline", "absolute"),
    [
        (["python3", "/opt/app.py"], True),
        (["python3", "-u", "/opt/app.py", "x/y"], True),
        (["python3", "-m", "mail.client"], True),  # not a path: pins refuse it otherwise
        (["python3", "-c", "print(1)"], True),  # no script at all
        (["python3"], True),
        (["python3", "app.py"], False),
        (["python3", "./app.py"], False),
        (["python3", "../srv/app.py"], False),
        (["python3", "/tmp/link/../../opt/app.py"], False),  # `..` after a symlink
        (["python3", "/opt/app/../app.py"], False),
    ],
)
def test_a_pin_rests_only_on_a_script_path_that_names_what_runs(
    cmdline: list[str], absolute: bool
) -> None:
    assert _named_absolutely(cmdline) is absolute


# -- start ticks --------------------------------------------------------------------------


def ticks_by_psutil(pid: int) -> float:
    return (psutil.Process(pid).create_time() - psutil.boot_time()) * os.sysconf("SC_CLK_TCK")


def test_start_ticks_are_the_kernels_start_time_of_the_process() -> None:
    assert abs(_start_ticks(os.getpid()) - ticks_by_psutil(os.getpid())) <= 1
    now = time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")
    assert _start_ticks(os.getpid()) <= now


def test_start_ticks_are_read_past_a_process_name_made_to_look_like_fields() -> None:
    """The name in /proc/<pid>/stat is the process's to choose: ") 1 2 (" must not shift fields."""
    name = ") S 1 1 1 0 ("
    child = subprocess.Popen(
        [sys.executable, "-c",
         f"open('/proc/self/comm', 'w').write({name!r}); print(flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        child.stdout.readline()  # renamed
        assert Path(f"/proc/{child.pid}/comm").read_text().rstrip("\n") == name
        assert abs(_start_ticks(child.pid) - ticks_by_psutil(child.pid)) <= 1
        assert _start_ticks(child.pid) >= _start_ticks(os.getpid())
    finally:
        child.kill()
        child.wait()


# -- sandbox ids ---------------------------------------------------------------------------


def flatpak_info(path: Path, text: str | bytes) -> int:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return os.open(path, os.O_RDONLY)


@pytest.mark.parametrize(
    ("text", "app_id"),
    [
        ("[Application]\nname=org.example.App\nruntime=runtime/x/y/z\n", "org.example.App"),
        ("[Application]\nname = org.gnome.Calculator\n", "org.gnome.Calculator"),
        ("[Runtime]\nname=org.freedesktop.Sdk\n", "org.freedesktop.Sdk"),  # `flatpak run` a runtime
        ("[Application]\nname=io.github.some_app-1\n", "io.github.some_app-1"),
        # Flatpak writes one of the two; a runtime's name wins, as in xdg-desktop-portal.
        ("[Application]\nname=org.a.B\n[Runtime]\nname=org.c.D\n", "org.c.D"),
    ],
)
def test_a_flatpak_app_id_is_read_from_flatpak_info(tmp_path: Path, text: str, app_id: str) -> None:
    fd = flatpak_info(tmp_path / ".flatpak-info", text)
    try:
        assert _flatpak_app_id(fd) == app_id
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "name=org.example.App\n",  # no section
        "[Application]\n",  # no name
        "[Instance]\nname=org.example.App\n",
        "[Application]\nname=org.example\n",  # two parts only
        "[Application]\nname=org.example.App;rm -rf\n",
        "[Application]\nname=org..App\n",
        "[Application]\nname=org.example.App\n  continued\n",
        "[Application]\nname=1org.example.App\n",
        "[Application\nname=org.example.App\n",
        "[Application]\nname=org.example.App\n" + "# padding\n" * (MAX_FLATPAK_INFO_BYTES // 10),
    ],
)
def test_a_flatpak_info_without_a_sound_app_id_is_refused(tmp_path: Path, text: str) -> None:
    fd = flatpak_info(tmp_path / ".flatpak-info", text)
    try:
        with pytest.raises(UnidentifiableSandbox):
            _flatpak_app_id(fd)
    finally:
        os.close(fd)


def test_a_flatpak_info_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / ".flatpak-info"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(UnidentifiableSandbox, match="regular file"):
            _flatpak_app_id(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("label", "snap"),
    [
        ("snap.firefox.firefox (enforce)", "firefox"),
        ("snap.lxd.hook.configure (enforce)", "lxd"),
        ("snap.app1.cmd (enforce)", "app1"),
    ],
)
def test_a_snaps_name_is_read_from_its_apparmor_label(label: str, snap: str) -> None:
    match = SNAP_LABEL.fullmatch(label)
    assert match and match.group(1) == snap
    assert _sandbox_of(os.getpid(), label) == AppId(AppKind.SNAP, snap)


@pytest.mark.parametrize(
    "label",
    [
        "",
        "unconfined",
        "/usr/bin/man (enforce)",
        "snap-update-ns.firefox (enforce)",
        "snap.Firefox.firefox (enforce)",
        "snap.-app.cmd (enforce)",
        "snap.a--b.cmd (enforce)",
        "snap.firefox (enforce)",
        "snap.firefox.firefox (enforce) ",
        "snap.firefox.firefox (unconfined)",
        "snap.my-app.daemon (complain)",  # devmode: the profile only logs
        "snap.app1.cmd",  # no mode: cannot tell it is enforced
        "system_u:system_r:snap.firefox.firefox:s0",
        "xsnap.firefox.firefox (enforce)",
    ],
)
def test_other_labels_name_no_snap(label: str) -> None:
    assert not SNAP_LABEL.fullmatch(label)


def test_a_host_process_has_no_sandbox() -> None:
    if Path("/.flatpak-info").exists():
        pytest.skip("the tests run inside a Flatpak sandbox")
    assert _sandbox_of(os.getpid(), "") is None


def test_a_sandbox_id_is_the_app_whatever_the_program() -> None:
    boxed = Caller(
        1000, 1000, 42, "/usr/bin/python3", 1, "/app/main.py", AppId(AppKind.FLATPAK, "org.a.B")
    )
    assert boxed.app == "flatpak:org.a.B" and boxed.identified
    assert Caller(1000, 1000, 42, "/usr/bin/python3", 1, "/app/main.py").app == (
        "/usr/bin/python3 /app/main.py"
    )
    gone = Caller(1000, 1000, 42, "", 1)
    assert gone.app == "" and not gone.identified


def test_a_peer_that_exited_before_the_look_has_no_app(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        subprocess.run(
            [sys.executable, "-c",
             f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r})"],
            check=True, timeout=30,
        )  # fmt: skip
        accepted, _ = listener.accept()  # the peer is gone (and reaped) by now
        with accepted:
            caller = identify_caller(accepted, connection=1)
    assert caller.pid > 0 and caller.uid == os.geteuid()
    assert (caller.executable, caller.app, caller.identified) == ("", "", False)


# -- the program, as the daemon finds it --------------------------------------------------


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """A copy of sleep, running from tmp_path/app."""
    program = tmp_path / "app"
    shutil.copy("/bin/sleep", program)
    running = subprocess.Popen([program, "30"])
    eventually(
        lambda: os.readlink(f"/proc/{running.pid}/exe") == str(program), "the exec", every=0.01
    )
    yield program, running
    running.kill()
    running.wait(timeout=30)


def test_a_program_replaced_on_disk_as_it_runs_is_still_the_program_at_its_path(
    sleeper: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    """An upgrade renames a new file over the old: the kernel says "(deleted)"."""
    program, running = sleeper
    assert running_program(running.pid) == str(program)
    shutil.copy("/bin/sleep", program.with_name("new"))
    program.with_name("new").replace(program)
    assert os.readlink(f"/proc/{running.pid}/exe") == f"{program} (deleted)"
    assert running_program(running.pid) == str(program)


def test_a_program_deleted_from_a_mount_of_its_own_namespace_is_not_the_daemons(
    tmp_path: Path,
) -> None:
    """Its path names the daemon's folder; its file lay on a tmpfs mounted over it elsewhere."""
    namespaces_available("-Urm")
    folder = tmp_path / "opt"
    folder.mkdir()
    plant = (
        'mount -t tmpfs none "$0"; cp /bin/sleep "$0/app"; "$0/app" 30 & echo $!;'
        ' read _; rm "$0/app"; echo gone; wait'
    )
    holder = subprocess.Popen(
        ["unshare", "-Urm", "sh", "-ec", plant, str(folder)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert holder.stdin is not None and holder.stdout is not None
        pid = int(holder.stdout.readline())
        eventually(
            lambda: os.readlink(f"/proc/{pid}/exe") == f"{folder}/app", "the exec", every=0.01
        )
        with pytest.raises(NotTheDaemonsFile, match=f"its program {folder}/app is not known"):
            running_program(pid)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline() == "gone\n"
        assert os.readlink(f"/proc/{pid}/exe") == f"{folder}/app (deleted)"
        with pytest.raises(NotTheDaemonsFile, match=f"its program {folder}/app is not known"):
            running_program(pid)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)


# -- the connection table ------------------------------------------------------------------


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def connection(pid: int, busy: bool = False) -> tuple[CallerConnection, FakeTransport]:
    transport = FakeTransport()
    made = CallerConnection(Caller(1000, 1000, pid, "/usr/bin/app", 0), transport)  # type: ignore[arg-type]
    made.active_calls = int(busy)
    return made, transport


def test_a_process_over_its_share_loses_its_own_oldest_idle_connection() -> None:
    table = ConnectionTable(limit=100, per_process=3)
    mine = [connection(7) for _ in range(3)]
    other, other_transport = connection(8)
    assert all(table.admit(c) for c, _ in [*mine, (other, other_transport)])
    newest, _ = connection(7)
    assert table.admit(newest)
    assert [t.closed for _, t in mine] == [True, False, False]  # its oldest
    assert not other_transport.closed and len(table) == 4


def test_a_process_whose_connections_are_all_busy_gets_no_more() -> None:
    table = ConnectionTable(limit=100, per_process=2)
    busy = [connection(7, busy=True) for _ in range(2)]
    assert all(table.admit(c) for c, _ in busy)
    refused, _ = connection(7)
    assert not table.admit(refused)
    assert not any(t.closed for _, t in busy) and len(table) == 2
    assert table.admit(connection(8)[0])  # another process still gets in


def test_at_the_total_limit_the_oldest_idle_connection_makes_room() -> None:
    table = ConnectionTable(limit=3, per_process=10)
    first_busy, first_busy_transport = connection(1, busy=True)
    idle, idle_transport = connection(2)
    later, later_transport = connection(3)
    for made in (first_busy, idle, later):
        assert table.admit(made)
    assert table.admit(connection(4)[0])
    assert (first_busy_transport.closed, idle_transport.closed, later_transport.closed) == (
        False,
        True,
        False,
    )
    assert len(table) == 3


def test_at_the_total_limit_with_every_call_busy_the_heaviest_process_gives_way() -> None:
    table = ConnectionTable(limit=4, per_process=10)
    light = connection(1, busy=True)
    heavy = [connection(2, busy=True) for _ in range(3)]
    for made, _ in [light, *heavy]:
        assert table.admit(made)
    assert table.admit(connection(3)[0])
    assert [t.closed for _, t in heavy] == [False, False, True]  # the heaviest's newest
    assert not light[1].closed and len(table) == 4


def test_forgetting_a_connection_twice_keeps_the_counts_right() -> None:
    table = ConnectionTable(limit=10, per_process=2)
    first, _ = connection(7)
    second, _ = connection(7)
    assert table.admit(first) and table.admit(second)
    table.remove(first)
    table.remove(first)  # evicted, then its connection_lost: once only
    assert len(table) == 1
    third, third_transport = connection(7)
    assert table.admit(third) and not third_transport.closed  # 2 of 2, nobody evicted
    table.remove(second)
    table.remove(third)
    assert len(table) == 0 and table.active_calls() == 0
