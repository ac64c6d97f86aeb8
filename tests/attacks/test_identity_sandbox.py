"""The strong identity a sandbox gives, and that a host process cannot take.

A Flatpak app's id is read from `/.flatpak-info` in the app's own mount namespace
(through /proc/<pid>/root, as xdg-desktop-portal does); the app cannot change that
file. Without Flatpak installed, the test builds such a caller the way Flatpak does
at heart: a new mount namespace whose root holds a `.flatpak-info` (the host's folders
bound in, so the same interpreter and script run), and the daemon's own code path
reads it. Before the fix the daemon had no notion of a sandbox: the caller was the
interpreter and script, whatever its root said.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import signin_broker
from signin_broker.daemon.apps.policy import AppRule, Decision
from signin_broker_testing import StubProvider
from support.apps import App, outcome, write_policy
from support.identity import auditor, namespaces_available
from support.signin import signed_in_daemon

APP_ID = "org.example.App"
FLATPAK_INFO = f"""\
[Application]
name={APP_ID}
runtime=runtime/org.example.Platform/x86_64/1

[Instance]
instance-id=1234
"""


SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "tmp", "proc", "dev")


def sandbox_root(folder: Path) -> tuple[Path, list[str]]:
    """A root folder with a `.flatpak-info`, and the host folders to bind into it.

    The system's folders, and those that hold the interpreter, the venv and this code.
    """
    root = folder / "sandbox"
    root.mkdir()
    (root / ".flatpak-info").write_text(FLATPAK_INFO)
    used = [
        os.path.realpath(sys.executable),
        sys.prefix,
        sys.base_prefix,
        __file__,
        signin_broker.__file__,
    ]
    binds = []
    for name in sorted({*SYSTEM, *(Path(os.path.realpath(path)).parts[1] for path in used)}):
        host = Path("/", name)
        if host.is_symlink():  # e.g. /lib -> usr/lib
            (root / name).symlink_to(os.readlink(host))
        elif host.is_dir():
            (root / name).mkdir()
            binds.append(name)
    return root, sorted(binds, key=lambda name: name != "tmp")  # /tmp holds the root itself


def run_sandboxed(root: Path, binds: list[str], command: list[str]) -> dict[str, object]:
    """Run the command as root of a new user and mount namespace, chrooted into the sandbox."""
    mounts = "".join(f'mount --rbind "/{name}" "$0/{name}"\n' for name in binds)
    process = subprocess.Popen(
        ["unshare", "-Urm", "sh", "-ec", mounts + 'exec chroot "$0" "$@"', str(root), *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return outcome(process, timeout=60)


def test_a_flatpak_caller_is_known_by_its_app_id_and_host_rules_and_callers_do_not_cross(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    namespaces_available("-Urm")
    root, binds = sandbox_root(folder)
    daemon = signed_in_daemon(stub, socket_path, "--new-apps", "deny")
    viewer = App(folder / "apps", "viewer")
    audit = auditor(folder / "apps")
    command = [sys.executable, str(viewer.path), str(socket_path), "token"]
    flatpak_rule = AppRule(f"flatpak:{APP_ID}", Decision.ALLOW)

    write_policy(socket_path, flatpak_rule, audit.rule("allow"))
    boxed = run_sandboxed(root, binds, command)
    assert boxed["ok"], boxed
    rows = audit.run(str(socket_path))
    (issued,) = [row for row in rows if row["action"] == "issue_token"]
    assert issued["actor_app"] == f"flatpak:{APP_ID}"
    host = viewer.run(socket_path, "token")  # the same interpreter and script, unboxed
    assert host.get("code") == "PERMISSION_DENIED", host

    write_policy(socket_path, AppRule(viewer.id, Decision.ALLOW), audit.rule("allow"))
    assert viewer.run(socket_path, "token")["ok"]
    boxed = run_sandboxed(root, binds, command)
    assert boxed.get("code") == "PERMISSION_DENIED", boxed
    assert f"flatpak:{APP_ID}" in str(boxed["message"])
    assert daemon.alive
    daemon.stop()
