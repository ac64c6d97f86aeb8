"""Running as a service: systemd units, socket activation, sd_notify, install-service, the wheel."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from signin_broker.cli import _service
from signin_broker.cli._service import systemd_plan
from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support import five_minutes
from support.commands import BIN
from support.installer import new_venv, pip
from support.real import unavailable
from support.signin import sign_in

REPO = Path(__file__).parents[2]


@pytest.fixture
def written_units(tmp_path: Path) -> tuple[dict[Path, str], dict[str, str]]:
    """The units install-service writes for this tree, and an environment to analyze them in."""
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze is needed (Debian package systemd)")
    plan = systemd_plan(BIN / "signin-brokerd", {"XDG_CONFIG_HOME": str(tmp_path)})
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    return plan.files, {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}


def test_the_units_pass_systemd_analyze_verify(
    written_units: tuple[dict[Path, str], dict[str, str]],
) -> None:
    files, env = written_units
    result = subprocess.run(
        ["systemd-analyze", "verify", "--user", *map(str, files)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr  # not even a warning
    (service,) = (text for path, text in files.items() if path.name == "signin-broker.service")
    assert f"ExecStart={BIN / 'signin-brokerd'}\n" in service
    assert "Type=notify" in service and "WatchdogSec=" in service


# Settings a user manager cannot apply without PrivateUsers=yes (systemd.exec(5)), which
# the daemon cannot run under (root's folders look like nobody's): systemd 252 skips the
# first ones silently, and refuses to start the service for the others (218/CAPABILITIES).
# (ProtectKernelTunables= and ProtectHostname= keep only a no-new-privileges part.) They
# would lower systemd-analyze's score while confining nothing, or stop the daemon.
NOT_FOR_A_USER_MANAGER = (
    "PrivateUsers", "ProtectSystem", "ProtectHome", "PrivateTmp", "ProtectControlGroups",
    "ProtectKernelTunables", "ProtectHostname", "ProtectProc", "ProcSubset", "ReadWritePaths",
    "ReadOnlyPaths", "InaccessiblePaths",
    "CapabilityBoundingSet", "PrivateDevices", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectClock",
)  # fmt: skip
EXPOSURE_AT_MOST = 6.3  # systemd-analyze security --user on systemd 252; 6.6 before the sandbox


def test_the_service_sandbox_scores_at_most_its_exposure_with_only_user_manager_settings(
    written_units: tuple[dict[Path, str], dict[str, str]],
) -> None:
    files, env = written_units
    (service,) = (path for path in files if path.name == "signin-broker.service")
    scored = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--user", "--no-pager",
         f"--threshold={round(EXPOSURE_AT_MOST * 10)}", str(service)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    overall = [line for line in scored.stdout.splitlines() if "Overall exposure" in line]
    assert scored.returncode == 0, f"{overall} {scored.stderr}"
    settings = {line.partition("=")[0] for line in files[service].splitlines() if "=" in line}
    assert not settings & set(NOT_FOR_A_USER_MANAGER)
    assert {"MemoryDenyWriteExecute", "KeyringMode", "LimitCORE", "MemoryMax"} <= settings


# How the unit confines the daemon, as far as a process can do it to itself without a
# service manager: no new privileges, no writable and executable memory (the kernel's
# own MemoryDenyWriteExecute, Linux 6.3 on), no core dump. Then it execs the command.
CONFINED_AS_THE_UNIT_SAYS = """
import ctypes, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS, PR_SET_MDWE, PR_GET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 38, 65, 66, 1
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
assert libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) == 0, ctypes.get_errno()
assert libc.prctl(PR_GET_MDWE, 0, 0, 0, 0) == PR_MDWE_REFUSE_EXEC_GAIN
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.execvp(sys.argv[1], sys.argv[1:])
"""


def _memory_deny_write_execute_missing() -> bool:
    """Whether this kernel lacks prctl(PR_SET_MDWE) (before Linux 6.3): PR_GET_MDWE fails."""
    pr_get_mdwe = 66
    return bool(ctypes.CDLL(None).prctl(pr_get_mdwe, 0, 0, 0, 0) == -1)


def test_socket_activation_the_first_connection_starts_the_daemon(
    stub: StubProvider, folder: Path
) -> None:
    """Started as the unit starts it: by its socket, confined as far as a process can be."""
    if shutil.which("systemd-socket-activate") is None:
        unavailable("systemd-socket-activate is needed (Debian package systemd)")
    if _memory_deny_write_execute_missing():
        unavailable("the kernel's MemoryDenyWriteExecute (prctl PR_SET_MDWE) needs Linux 6.3")
    socket_path = folder / "run" / "broker.sock"
    socket_path.parent.mkdir(mode=0o700)
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_STATE_HOME": str(folder / "state"),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
    }
    passed = ["PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "PYTHON_KEYRING_BACKEND"]
    activator = subprocess.Popen(
        [sys.executable, "-c", CONFINED_AS_THE_UNIT_SAYS,
         "systemd-socket-activate", "--listen", str(socket_path),
         *(f"--setenv={name}" for name in passed),
         sys.executable, "-m", "signin_broker.daemon.main",
         "--socket", str(socket_path), "--http", "127.0.0.1:0", "--issuer", stub.issuer],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert Path(f"/proc/{activator.pid}/exe").resolve().name == "systemd-socket-activate"
        with BrokerClient(socket_path, timeout=30) as client:
            status = client.status()  # this connection starts the daemon
            assert status.pid == activator.pid  # the activator became the daemon
            assert status.started_by == "socket activation"
            assert status.socket_path == str(socket_path)
            assert "NoNewPrivs:\t1" in Path(f"/proc/{status.pid}/status").read_text()
            assert re.search(
                r"Max core file size +0 +0 ", Path(f"/proc/{status.pid}/limits").read_text()
            )
            with Browser() as browser:
                sign_in(browser, SimpleNamespace(web_url=status.web_url.rstrip("/")))
            assert client.get_token().account == "user:1001"
        assert oct(socket_path.stat().st_mode & 0o777) == oct(0o600)
        activator.send_signal(signal.SIGTERM)
        assert activator.wait(15) == 0
        assert socket_path.exists()  # the service manager's socket is left to it
    finally:
        if activator.poll() is None:
            activator.kill()
            activator.wait(15)


def test_ready_comes_only_once_the_socket_serves_then_watchdog_pings(
    socket_path: Path, folder: Path
) -> None:
    notify_path = folder / "notify.sock"
    notifications = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notifications.bind(str(notify_path))
    notifications.settimeout(15)
    daemon = DaemonProcess(
        socket_path, env={"NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "400000"}
    )
    try:
        daemon.start(wait=False)
        first = notifications.recv(4096).decode()
        assert "READY=1" in first.splitlines(), first
        with BrokerClient(socket_path, timeout=2) as client:  # served the moment READY came
            status = client.status()
        assert status.started_by == "service manager"
        assert f"MAINPID={daemon.pid}" in first.splitlines()
        pings = []
        began = time.monotonic()
        while len(pings) < 3 and time.monotonic() - began < 10:
            message = notifications.recv(4096).decode()
            if message == "WATCHDOG=1":
                pings.append(time.monotonic())
        assert len(pings) == 3
        assert pings[-1] - pings[0] < 2  # every 0.2 s for a 0.4 s watchdog
        daemon.stop()
        rest = []
        notifications.settimeout(2)
        while True:
            try:
                rest.append(notifications.recv(4096).decode())
            except TimeoutError:
                break
        assert any("STOPPING=1" in message for message in rest), rest
    finally:
        notifications.close()


def test_install_service_dry_run_shows_the_units_for_this_installation(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(BIN / "signin-broker"), "install-service", "--dry-run"],
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    unit_folder = tmp_path / "systemd" / "user"
    assert f"# {unit_folder / 'signin-broker.socket'}\n" in result.stdout
    assert "ListenStream=%t/signin-broker/broker.sock" in result.stdout
    assert f"ExecStart={BIN / 'signin-brokerd'}\n" in result.stdout
    assert "$ systemctl --user enable --now signin-broker.socket" in result.stdout
    assert not unit_folder.exists()  # a dry run writes nothing


def fake_systemctl(folder: Path, exit_status: int) -> dict[str, str]:
    """A PATH whose systemctl records its arguments and exits with exit_status."""
    folder.mkdir(exist_ok=True)
    script = folder / "systemctl"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {folder / "calls"}\n'
        f'[ {exit_status} -eq 0 ] || echo "Failed to connect to bus" >&2\nexit {exit_status}\n'
    )
    script.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


@pytest.mark.parametrize("systemctl_works", [True, False])
def test_install_service_writes_enables_and_uninstalls(
    tmp_path: Path,
    systemctl_works: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As a user (root is refused, below): in process, with the uid a user's."""
    bin_folder = tmp_path / "bin"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name, value in fake_systemctl(bin_folder, 0 if systemctl_works else 1).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_service.os, "geteuid", lambda: 1000)
    installed = _service.install_service(SimpleNamespace(dry_run=False, uninstall=False))
    said = capsys.readouterr().err
    units = tmp_path / "config" / "systemd" / "user"
    assert (units / "signin-broker.socket").exists() and (units / "signin-broker.service").exists()
    calls = (bin_folder / "calls").read_text().splitlines()
    if systemctl_works:
        assert installed == 0, said
        assert calls == ["--user daemon-reload", "--user enable --now signin-broker.socket"]
    else:
        assert installed == 1
        assert "systemctl failed: Failed to connect to bus" in said
        assert "systemctl --user enable --now signin-broker.socket" in said
        return
    removed = _service.install_service(SimpleNamespace(dry_run=False, uninstall=True))
    assert removed == 0, capsys.readouterr().err
    assert not (units / "signin-broker.socket").exists()
    assert "--user disable --now signin-broker.socket" in (bin_folder / "calls").read_text()


def test_install_service_as_root_refuses_and_says_why(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the refusal is for root")
    bin_folder = tmp_path / "bin"
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **fake_systemctl(bin_folder, 0),
    }
    install = subprocess.run(
        [str(BIN / "signin-broker"), "install-service"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert install.returncode == 1
    assert "ConditionUser=!root" in install.stderr and "as that user" in install.stderr
    assert not (tmp_path / "config").exists() and not (bin_folder / "calls").exists()


INSTALLED_MB = """
import importlib.metadata, os
print(sum(
    os.path.getsize(dist.locate_file(f))
    for dist in importlib.metadata.distributions()
    if dist.metadata["Name"].lower() not in ("pip", "setuptools")
    for f in dist.files or ()
    if os.path.isfile(dist.locate_file(f))
) / 2**20)
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The base wheel and the test tooling's, built from this tree."""
    folder = tmp_path_factory.mktemp("wheels")
    for project in (REPO, REPO / "packaging" / "testing"):
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
             "--wheel-dir", str(folder), str(project)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    (wheel,) = folder.glob("signin_broker-*.whl")
    (test_tooling,) = folder.glob("signin_broker_testing-*.whl")
    return wheel, test_tooling


@pytest.mark.external
def test_the_wheel_works_in_a_fresh_venv_without_the_source_tree(
    tmp_path: Path, wheels: tuple[Path, Path]
) -> None:
    wheel, test_tooling = wheels
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        runtime = [
            line
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist:") and "extra ==" not in line
        ]
    assert {
        "signin_broker/v1/broker_pb2.py",
        "signin_broker/v1/broker_pb2_grpc.py",
        "signin_broker/v1/broker.proto",
    } <= names
    assert "signin_broker/service/systemd/signin-broker.service" in names
    assert any("grpcio>=" in line for line in runtime)
    assert not any("grpcio-tools" in line for line in runtime)
    assert not any(name.startswith("tests/") for name in names)
    # The stub and the conformance runner are the second wheel's, a top-level package of
    # its own: the two wheels share no file and no folder.
    assert not any(name.startswith("signin_broker_testing/") for name in names)
    with zipfile.ZipFile(test_tooling) as archive:
        tooling = {n for n in archive.namelist() if ".dist-info/" not in n}
    assert "signin_broker_testing/provider.py" in tooling
    assert "signin_broker_testing/conformance/runner.py" in tooling
    assert all(name.startswith("signin_broker_testing/") for name in tooling), tooling
    assert not {str(Path(n).parent) for n in tooling} & {str(Path(n).parent) for n in names}
    venv = tmp_path / "venv"
    python = new_venv(venv)
    installed = pip(python, "install", str(wheel))
    assert installed.returncode == 0, installed.stderr
    elsewhere = {**os.environ, "PYTHONPATH": "", "VIRTUAL_ENV": str(venv)}
    version = subprocess.run(
        [str(venv / "bin" / "signin-broker"), "--version"],
        cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert version.returncode == 0 and version.stdout.startswith("signin-broker "), version
    shipped = subprocess.run(
        [str(venv / "bin" / "signin-broker"), "proto"],
        cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    proto = Path(shipped.stdout.strip())
    assert shipped.returncode == 0 and proto.is_relative_to(venv), shipped
    assert proto.read_bytes() == (REPO / "proto/signin_broker/v1/broker.proto").read_bytes()
    for helper in ("git-credential-signin-broker", "docker-credential-signin-broker"):
        assert (venv / "bin" / helper).exists()
    for page in ("man1/signin-broker.1", "man1/signin-brokerd.1", "man5/signin-broker.toml.5"):
        assert (venv / "share" / "man" / page).is_file()  # `man signin-broker` finds them
    socket_path = tmp_path / "run" / "broker.sock"
    daemon = DaemonProcess(socket_path)
    daemon.args[0] = str(venv / "bin" / "python")  # the installed daemon, not this tree's
    # keyrings.alt, the suite's keyring, is a dev tool the wheel does not bring: this
    # daemon must start anyway and say its sessions stay in memory.
    daemon.env |= {"PYTHONPATH": "", "PYTHONSAFEPATH": "1"}
    with daemon:
        status = subprocess.run(
            [str(venv / "bin" / "signin-broker"), "--socket", str(socket_path), "status", "--json"],
            cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["pid"] == daemon.pid
        assert shown["storage"].startswith("memory only: the keyring backend cannot be loaded")
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import signin_broker; print(signin_broker.__file__)"],
        cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert where.stdout.startswith(str(venv)), where.stdout  # not the source tree
    # The base install's size: every distribution's files as pip recorded them (pip's own
    # and setuptools' left out), at most 60 MB (it was 78 MB with psutil and uvloop).
    sized = subprocess.run(
        [str(venv / "bin" / "python"), "-c", INSTALLED_MB],
        env=elsewhere, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert float(sized.stdout) <= 60, sized.stdout
    # One JOSE library in a base install (authlib's own, joserfc).
    listed = subprocess.run(
        [str(venv / "bin" / "pip"), "list", "--format", "json"],
        env=elsewhere, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    installed_names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "joserfc" in installed_names
    assert not installed_names & {"pyjwt", "python-jose", "jwcrypto", "jwt"}
    # Without the test tooling, its commands say what to install, as it can be installed.
    for command in (
        [str(venv / "bin" / "python"), "-m", "signin_broker.testing"],
        [str(venv / "bin" / "signin-broker"), "conformance", "--surface", "desktop"],
        [str(venv / "bin" / "signin-broker"), "try"],
    ):
        missing = subprocess.run(
            command, cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=30
        )
        assert missing.returncode == 2, missing
        assert "pip install signin_broker_testing-" in missing.stderr, missing.stderr
        assert "Traceback" not in missing.stderr
    installed = pip(python, "install", str(test_tooling))
    assert installed.returncode == 0, installed.stderr
    # The start page's five minutes, from the two wheels alone.
    trying = subprocess.run(
        [str(venv / "bin" / "signin-broker"), "try", "sh", "-c", five_minutes.script()],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
        env=elsewhere | {
            "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
            "SIGNIN_BROKER_BROWSER": five_minutes.BROWSER,
        },
    )  # fmt: skip
    assert trying.returncode == 0, trying.stdout
    assert not five_minutes.mismatch(trying.stdout), five_minutes.mismatch(trying.stdout)
    # The conformance cases are package code: the installed wheels run them by themselves.
    registry = tmp_path / "registry.jsonl"
    conformance = subprocess.run(
        [str(venv / "bin" / "signin-broker"), "conformance", "--surface", "desktop",
         "--case", "T2", "--case", "T5", "--registry", str(registry)],
        cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert conformance.returncode == 0, conformance.stderr
    assert "desktop  T1-T8 PASS (T1, T3, T4, T6, T7, T8 SKIP)" in conformance.stdout
    assert registry.with_suffix(".html").is_file()


TOOLING_WORKS = """
import signin_broker_testing
from signin_broker_testing import StubProvider
with StubProvider() as stub:
    print(stub.issuer)
"""
BASE_WORKS = """
import signin_broker
from signin_broker.client import BrokerClient
print(signin_broker.__version__)
"""


@pytest.mark.external
def test_the_two_wheels_install_and_uninstall_in_either_order(
    tmp_path: Path, wheels: tuple[Path, Path]
) -> None:
    """Neither wheel's install or removal touches the other's files: no shared folder."""
    wheel, test_tooling = wheels
    venv = tmp_path / "venv"
    python = new_venv(venv)
    elsewhere = {**os.environ, "PYTHONPATH": "", "VIRTUAL_ENV": str(venv)}

    def install(*args: str) -> None:
        done = pip(python, *args)
        assert done.returncode == 0, done.stderr

    def works(code: str) -> bool:
        run = subprocess.run(
            [str(python), "-c", code],
            cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return run.returncode == 0

    def alias_answers() -> str:
        run = subprocess.run(
            [str(python), "-m", "signin_broker.testing", "--help"],
            cwd=tmp_path, env=elsewhere, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return f"{run.returncode} {run.stdout}{run.stderr}"

    # The tooling first (its pin on the broker, which brings what the stub runs on, left
    # to the next step), then the base.
    install("install", "--no-deps", str(test_tooling))
    assert works("import signin_broker_testing") and not works(BASE_WORKS)
    install("install", str(wheel))
    assert works(BASE_WORKS) and works(TOOLING_WORKS)
    assert alias_answers().startswith("0 usage: python -m signin_broker_testing")
    # Removing the base leaves the tooling whole, and reinstalling it changes nothing there.
    install("uninstall", "--yes", "signin-broker")
    assert not works(BASE_WORKS)
    assert works(TOOLING_WORKS)  # the stub imports nothing of the broker
    install("install", str(wheel))
    assert works(BASE_WORKS) and works(TOOLING_WORKS)
    # Removing the tooling leaves the base whole; the old name then says what to install.
    install("uninstall", "--yes", "signin-broker-testing")
    assert works(BASE_WORKS) and not works(TOOLING_WORKS)
    assert alias_answers().startswith("2 python -m signin_broker.testing: the stub provider")
    install("install", "--no-deps", str(test_tooling))
    assert works(BASE_WORKS) and works(TOOLING_WORKS)
    assert works("from signin_broker.testing.daemon import DaemonProcess")
