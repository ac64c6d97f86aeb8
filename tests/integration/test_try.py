"""`signin-broker try`: the start page's five-minute path, with nothing of the person touched."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from signin_broker_testing.daemon import short_temp_dir
from support.commands import BIN
from support.five_minutes import BROWSER, mismatch, script
from support.waiting import eventually


@pytest.fixture
def short(tmp_path: Path) -> Iterator[Path]:
    """A TMPDIR short enough for try's socket, to see that try leaves nothing in it."""
    folder = short_temp_dir()
    yield folder
    shutil.rmtree(folder)


def person(tmp_path: Path, temp: Path) -> dict[str, str]:
    """The environment of a person whose own settings all point elsewhere, as a trap."""
    config = tmp_path / "config" / "signin-broker"
    config.mkdir(parents=True)
    (config / "config.toml").write_text('issuer = "https://own.example"\n')
    managed = tmp_path / "managed" / "signin-broker"
    managed.mkdir(parents=True)
    (managed / "config.toml").write_text('client_id = "managed"\n')
    return {
        **os.environ,
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "SIGNIN_BROKER_BROWSER": BROWSER,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_CONFIG_DIRS": str(tmp_path / "managed"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "SIGNIN_BROKER_ISSUER": "https://variable.example",
        "SIGNIN_BROKER_SOCKET": str(tmp_path / "own.sock"),
        "TMPDIR": str(temp),
    }


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def refused(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as probe:
        return probe.connect_ex((parts.hostname or "", parts.port or 0)) != 0


def test_the_start_pages_session_runs_as_written_and_leaves_nothing(
    tmp_path: Path, short: Path
) -> None:
    """docs/start/first-sign-in.md's commands in try's shell: sign-in, token, curl."""
    environ = person(tmp_path, short)
    status = "signin-broker status --json > status.json\n"
    done = subprocess.run(
        [str(BIN / "signin-broker"), "try", "sh", "-c", status + script()],
        cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    assert not mismatch(done.stdout), mismatch(done.stdout)
    shown = json.loads((tmp_path / "status.json").read_text())
    # The daemon of its own: the stub's issuer alone, none of the person's settings.
    (provider,) = shown["providers"]
    assert provider["issuer"].startswith("http://127.0.0.1:"), provider
    assert provider["client_id"] == "signin-broker", provider
    assert shown["storage"].startswith("key file "), shown["storage"]
    assert not (tmp_path / "own.sock").exists() and not (tmp_path / "state").exists()
    # Stopped and gone with the shell: the daemon, the stub and their folder.
    assert gone(shown["pid"]) and refused(provider["issuer"])
    assert not list(short.iterdir())


def test_told_to_end_it_stops_the_command_daemon_and_provider(tmp_path: Path, short: Path) -> None:
    environ = person(tmp_path, short)
    trying = subprocess.Popen(
        [str(BIN / "signin-broker"), "try", "sh", "-c",
         "signin-broker status --json > status.json && exec sleep 60"],
        cwd=tmp_path, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        shown = eventually(
            lambda: (
                (tmp_path / "status.json").is_file()
                and (tmp_path / "status.json").read_text().endswith("\n")
                and json.loads((tmp_path / "status.json").read_text())
            ),
            timeout=60,
            what="the command's status of try's daemon",
        )
        trying.send_signal(signal.SIGTERM)
        assert trying.wait(30) == 128 + signal.SIGTERM
    finally:
        trying.kill()
        trying.communicate()
    (provider,) = shown["providers"]
    assert gone(shown["pid"]) and refused(provider["issuer"])
    assert not list(short.iterdir())
