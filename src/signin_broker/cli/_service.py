"""`signin-broker install-service`: run the daemon the way this platform runs user services.

Linux: systemd user units (socket activation: the first app to connect starts the
daemon) in the user's unit folder, enabled and started with `systemctl --user`.
macOS: a launchd agent in ~/Library/LaunchAgents, loaded with `launchctl`. The unit
files are shipped in the package (signin_broker/service/); ExecStart is set to the
signin-brokerd that belongs to this installation, so a pipx or venv install works.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DAEMON = "signin-brokerd"
SYSTEMD_UNITS = ("signin-broker.socket", "signin-broker.service")
LAUNCHD_LABEL = "org.signin-broker.daemon"
AS_ROOT = (
    "signin-broker: install-service installs the broker for the person who signs in, and"
    " root is nobody's session: the units say ConditionUser=!root, so systemd would never"
    " start them. Run it as that user, from their own session (not through sudo)."
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What installing means here: files to write and commands to run (and to undo)."""

    files: dict[Path, str]
    install: list[list[str]]
    uninstall: list[list[str]]


def daemon_path() -> Path:
    """The signin-brokerd of this installation: beside the interpreter running this command."""
    beside = Path(sys.executable).parent / DAEMON
    return beside if beside.exists() else Path(sys.argv[0]).resolve().parent / DAEMON


def systemd_plan(daemon: Path, environ: dict[str, str]) -> Plan:
    """User units in $XDG_CONFIG_HOME/systemd/user, the service pointed at `daemon`."""
    config = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    folder = config / "systemd" / "user"
    files = {}
    for name in SYSTEMD_UNITS:
        text = resources.files("signin_broker.service.systemd").joinpath(name).read_text()
        files[folder / name] = text.replace("/usr/bin/signin-brokerd", str(daemon))
    return Plan(
        files,
        install=[
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", "signin-broker.socket"],
        ],
        uninstall=[
            ["systemctl", "--user", "disable", "--now", "signin-broker.socket"],
            ["systemctl", "--user", "stop", "signin-broker.service"],
            ["systemctl", "--user", "daemon-reload"],
        ],
    )


def launchd_plan(daemon: Path) -> Plan:
    """A launchd agent in ~/Library/LaunchAgents, logging to ~/Library/Logs."""
    name = f"{LAUNCHD_LABEL}.plist"
    text = resources.files("signin_broker.service.launchd").joinpath(name).read_text()
    text = text.replace("@SIGNIN_BROKERD@", str(daemon)).replace(
        "@LOG_FILE@", str(Path.home() / "Library" / "Logs" / "signin-broker.log")
    )
    path = Path.home() / "Library" / "LaunchAgents" / name
    domain = f"gui/{os.getuid()}"
    return Plan(
        {path: text},
        install=[["launchctl", "bootstrap", domain, str(path)]],
        uninstall=[["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"]],
    )


def install_service(args: argparse.Namespace) -> int:
    """Install (or remove) the service for this user (no daemon need run); --dry-run prints."""
    if os.geteuid() == 0 and not args.dry_run:
        print(AS_ROOT, file=sys.stderr)
        return 1
    if sys.platform.startswith("linux"):
        plan = systemd_plan(daemon_path(), dict(os.environ))
    elif sys.platform == "darwin":
        plan = launchd_plan(daemon_path())
    else:
        print(
            "signin-broker: install-service knows systemd (Linux) and launchd (macOS);"
            " on this platform, see packaging/README.md",
            file=sys.stderr,
        )
        return 1
    if args.dry_run:
        return _show(plan, uninstall=args.uninstall)
    if args.uninstall:
        _run_all(plan.uninstall, must_succeed=False)
        for path in plan.files:
            path.unlink(missing_ok=True)
            print(f"removed {path}", file=sys.stderr)
        return 0
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)
    return 0 if _run_all(plan.install, must_succeed=True) else 1


def _show(plan: Plan, *, uninstall: bool) -> int:
    if uninstall:
        for command in plan.uninstall:
            print("$ " + " ".join(command))
        for path in plan.files:
            print(f"$ rm {path}")
        return 0
    for path, text in plan.files.items():
        print(f"# {path}\n{text}")
    for command in plan.install:
        print("$ " + " ".join(command))
    return 0


def _run_all(commands: list[list[str]], *, must_succeed: bool) -> bool:
    for command in commands:
        print("$ " + " ".join(command), file=sys.stderr)
        try:
            done = subprocess.run(  # noqa: S603 - fixed commands, no shell
                command, check=False, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            reason = str(error)
        else:
            if done.returncode == 0:
                continue
            reason = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        print(f"signin-broker: {command[0]} failed: {reason}", file=sys.stderr)
        if must_succeed:
            print(
                "The files are written; start the service yourself once the service manager"
                " runs (for systemd: `systemctl --user enable --now signin-broker.socket`).",
                file=sys.stderr,
            )
            return False
    return True
