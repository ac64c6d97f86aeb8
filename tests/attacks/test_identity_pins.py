"""A sha256 pin must not be passed by an impostor or an edit, nor hang on a FIFO.

Before the fix, a script named by a relative path was resolved against the process's
*current* cwd, so an impostor that chdir'd next to a pinned script passed its pin; the
hash was remembered by inode, size and mtime, so a same-size edit with the mtime put
back passed until a restart; and the pinned file was read on the event loop whatever
it was, so a FIFO (or a device) at its path stopped the daemon.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.daemon import DaemonProcess
from support.apps import outcome, write_policy
from support.identity import Script
from support.signin import signed_in_daemon

# One GetToken after an optional trick; its last line is the one a same-size edit changes.
PINNED = """\
import json, os, sys
from signin_broker.client import BrokerClient, BrokerError

socket_path, trick = sys.argv[1:3]
if trick.startswith("chdir:"):  # stand next to the pinned script, as an impostor would
    os.chdir(trick.removeprefix("chdir:"))
elif trick == "fifo":  # python has read this file; what the daemon finds is a FIFO
    os.unlink(sys.argv[0])
    os.mkfifo(sys.argv[0])
elif trick == "device":
    os.unlink(sys.argv[0])
    os.symlink("/dev/zero", sys.argv[0])
with BrokerClient(socket_path, timeout=10) as broker:
    try:
        broker.get_token()
        result = {"ok": True}
    except BrokerError as error:
        result = {"ok": False, "code": error.code.name, "message": error.message}
print(json.dumps(result))
# edited: a
"""


def pinned_daemon(stub: StubProvider, socket_path: Path, app: Script) -> DaemonProcess:
    """A signed-in daemon that denies new apps and allows `app` pinned to its file's sha256."""
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    sha256 = hashlib.sha256(app.path.read_bytes()).hexdigest()
    write_policy(socket_path, app.rule("allow", sha256))
    return daemon


def run_relative(folder: Path, socket_path: Path, trick: str) -> dict[str, object]:
    """Run `mail.py` by a relative path from `folder`."""
    process = subprocess.Popen(
        [sys.executable, "mail.py", str(socket_path), trick],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return outcome(process, timeout=60)


def test_an_impostor_that_chdirs_next_to_a_pinned_script_does_not_pass_its_pin(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    mail = Script(folder / "allowed", "mail", PINNED)
    impostor_folder = folder / "impostor"
    Script(impostor_folder, "mail", PINNED + "# not the pinned build\n")
    daemon = pinned_daemon(stub, socket_path, mail)
    assert mail.run(str(socket_path), "none") == {"ok": True}  # by its absolute path
    impostor = run_relative(impostor_folder, socket_path, f"chdir:{mail.path.parent}")
    assert impostor.get("code") == "PERMISSION_DENIED", impostor
    relative = run_relative(mail.path.parent, socket_path, "none")  # even the real one
    assert relative.get("code") == "PERMISSION_DENIED", relative
    assert "run it by its absolute path" in str(relative["message"])
    assert mail.run(str(socket_path), "none") == {"ok": True}
    daemon.stop()


def test_a_same_size_edit_with_the_mtime_put_back_does_not_keep_the_pin(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    mail = Script(folder / "allowed", "mail", PINNED)
    daemon = pinned_daemon(stub, socket_path, mail)
    assert mail.run(str(socket_path), "none") == {"ok": True}  # the daemon has hashed it

    def put_last_letter(letter: bytes) -> None:
        before = mail.path.stat()
        with mail.path.open("r+b") as file:  # in place: the same inode and size
            file.seek(before.st_size - 2)
            file.write(letter)
        os.utime(mail.path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = mail.path.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )

    put_last_letter(b"b")
    edited = mail.run(str(socket_path), "none")
    assert edited.get("code") == "PERMISSION_DENIED", edited
    assert "sha256 changed" in edited["message"]
    put_last_letter(b"a")  # the pinned bytes again: allowed again
    assert mail.run(str(socket_path), "none") == {"ok": True}
    daemon.stop()


@pytest.mark.parametrize("trick", ["fifo", "device"])
def test_a_pinned_script_swapped_for_a_fifo_or_a_device_is_refused_without_blocking(
    stub: StubProvider, socket_path: Path, folder: Path, trick: str
) -> None:
    mail = Script(folder / "allowed", "mail", PINNED)
    daemon = pinned_daemon(stub, socket_path, mail)
    try:
        swapped = mail.run(str(socket_path), trick)
        assert swapped.get("code") == "PERMISSION_DENIED", swapped
        assert "not a regular file" in swapped["message"]
        with BrokerClient(socket_path, timeout=5) as other:  # the daemon still serves
            assert other.status().caller.pid == os.getpid()
        assert daemon.stop(timeout=15) == 0  # and hears SIGTERM
    finally:
        if daemon.alive:
            daemon.kill()


def test_an_impostor_naming_a_pinned_script_through_a_symlink_and_dotdot_does_not_pass_its_pin(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    """`<link>/../../allowed/mail.py` reads as the pinned script but runs the impostor.

    The kernel resolves `..` after following the link, so the path leads into the
    impostor's own tree; taken apart as text, it names the pinned file. The link can
    be in any folder the impostor may write (e.g. /tmp): the pinned script's folder
    need not be writable.
    """
    mail = Script(folder / "allowed", "mail", PINNED)
    Script(folder / "evil" / "allowed", "mail", PINNED + "# not the pinned build\n")
    (folder / "evil" / "a" / "b").mkdir(parents=True)
    (folder / "links").mkdir()
    (folder / "links" / "lnk").symlink_to(folder / "evil" / "a" / "b")
    daemon = pinned_daemon(stub, socket_path, mail)
    disguised = f"{folder}/links/lnk/../../allowed/mail.py"
    assert os.path.normpath(disguised) == str(mail.path)  # as text: the pinned script
    assert os.path.realpath(disguised) == str(folder / "evil" / "allowed" / "mail.py")
    process = subprocess.Popen(
        [sys.executable, disguised, str(socket_path), "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    impostor = outcome(process, timeout=60)
    assert impostor.get("code") == "PERMISSION_DENIED", impostor
    assert mail.run(str(socket_path), "none") == {"ok": True}
    daemon.stop()
