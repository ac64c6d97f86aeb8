"""A shared login node: N users' brokers beside N oidc-agents, measured in the same run.

    sudo python benchmarks/bench_login_node.py --users 100 --active 10   # prints a table

Needs root (it creates N real OS users and removes them at the end), systemd's
`systemd-socket-activate` and, for the incumbent's column, Debian's oidc-agent.

Each user gets a signed-in daemon started as their service would start it: by its
socket, with systemd-socket-activate standing in for the user manager (run again each
time the daemon it became exits, as a socket unit keeps listening), the settings a
login node's administrator would give (`key_store = "file"`: no keyring on such a
node; `idle_exit_seconds`). The users sign in with a device sign-in that the stub
approves. M of them are active (a GetToken every few seconds), the rest idle. After a
settle period the table shows the total PSS of every broker process and of N
oidc-agents, each holding one account at the same provider (the stub), and the first
GetToken of idle users (socket activation, the start, the confirmation with the
provider, the token), timed inside a process of that user.

The users' Python is a venv of /usr/bin/python3 every user can run (the developer's
may live under /root), with this tree installed editable (uv, else venv and pip), as the
base install has it: without the uvloop extra (`--uvloop` adds it; 0.3 MB of PSS more
for each daemon, measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _incumbent  # beside this file, as the script's folder is on sys.path
import psutil

from signin_broker_testing import StubProvider
from signin_broker_testing.models import DEFAULT_CLIENT

TREE = Path(__file__).parents[1]
PREFIX = "sbln"  # the users' names: sbln000, sbln001, ...
UV = TREE / ".cache" / "uv" / "bin" / "uv"

# What each user runs, as that user, with the users' Python: sign in (device flow, the
# code printed for the bench to approve), call every few seconds, or time a first call.
USER_SIDE = r"""
import json, sys, time
from signin_broker.client import BrokerClient
mode, argument = sys.argv[1], float(sys.argv[2])
with BrokerClient(timeout=60) as client:
    if mode == "sign-in":
        started = client.begin_sign_in(device=True)
        print(json.dumps({"user_code": started.user_code}), flush=True)
        deadline = time.monotonic() + argument
        while not client.accounts() and time.monotonic() < deadline:
            time.sleep(0.2)
        client.get_token()
    elif mode == "active":
        deadline = time.monotonic() + argument
        while time.monotonic() < deadline:
            client.get_token()
            time.sleep(3)
    else:
        began = time.perf_counter()
        client.get_token()
        print(json.dumps({"seconds": time.perf_counter() - began}), flush=True)
"""


class User:
    """One OS user of the node, with the folders their session would have."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.home = root / name
        self.runtime = self.home / "run"
        self.socket = self.runtime / "signin-broker" / "broker.sock"
        self.uid = pwd.getpwnam(name).pw_uid
        self.gid = pwd.getpwnam(name).pw_gid

    def env(self, issuer: str, idle_exit: int) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.runtime),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_STATE_HOME": str(self.home / "state"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "SIGNIN_BROKER_ISSUER": issuer,
            "SIGNIN_BROKER_HTTP": "127.0.0.1:0",
            "SIGNIN_BROKER_KEY_STORE": "file",
            "SIGNIN_BROKER_IDLE_EXIT_SECONDS": str(idle_exit),
            "SIGNIN_BROKER_AUTOSTART": "0",
        }

    def run(
        self, python: Path, mode: str, argument: float, env: dict[str, str]
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [str(python), "-c", USER_SIDE, mode, str(argument)],
            env=env, user=self.uid, group=self.gid, extra_groups=[],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip


class SocketUnit:
    """systemd-socket-activate as the user, again each time the daemon it became exits."""

    def __init__(self, user: User, python: Path, env: dict[str, str]) -> None:
        self.user, self.env = user, env
        self.command = [
            "systemd-socket-activate", "--listen", str(user.socket),
            *(f"--setenv={name}" for name in env),
            str(python), "-m", "signin_broker.daemon.main",
        ]  # fmt: skip
        self.listening = threading.Event()
        self.stopped = False
        self.current: subprocess.Popen[str] | None = None
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self.stopped:
            self.current = subprocess.Popen(
                self.command, env=self.env, user=self.user.uid, group=self.user.gid,
                extra_groups=[], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert self.current.stderr is not None
            for line in self.current.stderr:
                if line.startswith("Listening on"):
                    self.listening.set()
            self.listening.clear()
            self.current.wait()

    def stop(self) -> None:
        self.stopped = True
        if self.current is not None and self.current.poll() is None:
            self.current.terminate()


def users_python(folder: Path, uvloop: bool) -> Path:
    """A venv of /usr/bin/python3 with this tree installed, which every user can run."""
    venv = folder / "venv"
    tree = f"{TREE}[uvloop]" if uvloop else str(TREE)
    if UV.exists():
        subprocess.run(
            [str(UV), "venv", "--quiet", "--python", "/usr/bin/python3", str(venv)], check=True
        )
        subprocess.run(
            [str(UV), "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
             "-e", tree],
            check=True, env={**os.environ, "UV_COMPILE_BYTECODE": "1"},
        )  # fmt: skip
    else:
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-e", tree], check=True)
    return venv / "bin" / "python"


@contextlib.contextmanager
def os_users(count: int, root: Path) -> Iterator[list[User]]:
    names = [f"{PREFIX}{i:03d}" for i in range(count)]
    try:
        for name in names:
            subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True)
            user = User(name, root)
            for folder in (user.home, user.runtime, user.socket.parent):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chown(folder, user.uid, user.gid)
        yield [User(name, root) for name in names]
    finally:
        for name in names:
            subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        time.sleep(0.5)
        for name in names:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def sign_in(user: User, python: Path, env: dict[str, str], stub: StubProvider) -> None:
    helper = user.run(python, "sign-in", 60, env)
    assert helper.stdout is not None
    code = json.loads(helper.stdout.readline())["user_code"]
    stub.approve_device(code)
    if helper.wait(120) != 0:
        raise RuntimeError(f"{user.name} did not sign in")


def broker_pss(uids: set[int]) -> tuple[float, int]:
    """The total PSS (MB) of the broker daemons of these users, and how many there are.

    Only theirs: a daemon of anyone else on the machine (a developer's, a test's) is not
    the benchmark's, nor a process whose command line merely names the module.
    """
    total, count = 0, 0
    for process in psutil.process_iter(["cmdline", "name", "uids"]):
        command = process.info["cmdline"] or ()
        if process.info["uids"] is None or process.info["uids"].real not in uids:
            continue
        waiting = process.info["name"] == "systemd-socket-activate"  # the manager's stand-in
        if not waiting and command[1:3] == ["-m", "signin_broker.daemon.main"]:
            with contextlib.suppress(psutil.Error):
                total += process.memory_full_info().pss
                count += 1
    return total / 2**20, count


def agents_pss(uids: set[int]) -> tuple[float, int]:
    """The total PSS (MB) of these users' oidc-agent processes, and how many there are."""
    total, count = 0, 0
    for process in psutil.process_iter(["name", "uids"]):
        if process.info["uids"] is None or process.info["uids"].real not in uids:
            continue
        if process.info["name"] == "oidc-agent":
            with contextlib.suppress(psutil.Error):
                total += process.memory_full_info().pss
                count += 1
    return total / 2**20, count


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--active", type=int, default=10)
    parser.add_argument("--idle-exit", type=int, default=30, help="idle_exit_seconds")
    parser.add_argument("--settle", type=float, default=60, help="seconds after the sign-ins")
    parser.add_argument("--samples", type=int, default=20, help="idle users' first calls timed")
    parser.add_argument("--uvloop", action="store_true", help="the daemons run on uvloop")
    options = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("systemd-socket-activate") is None:
        sys.exit("needs root and systemd-socket-activate")

    folder = Path(tempfile.mkdtemp(prefix="sb-login-node-", dir="/tmp"))
    folder.chmod(0o755)
    python = users_python(folder, options.uvloop)
    clients = [_incumbent.CLIENT] if _incumbent.installed() else []
    units: list[SocketUnit] = []
    with (
        StubProvider(clients=[DEFAULT_CLIENT, *clients], device_interval=1) as stub,
        os_users(options.users, folder / "users") as users,
        contextlib.ExitStack() as agents,
    ):
        began = time.monotonic()
        envs = {user.name: user.env(stub.issuer, options.idle_exit) for user in users}
        for user in users:
            units.append(SocketUnit(user, python, envs[user.name]))
        for unit in units:
            unit.listening.wait(30)
        with ThreadPoolExecutor(10) as pool:
            list(pool.map(lambda user: sign_in(user, python, envs[user.name], stub), users))
        print(f"{options.users} users signed in after {time.monotonic() - began:.0f} s", flush=True)
        active = [
            user.run(python, "active", options.settle + 60, envs[user.name])
            for user in users[: options.active]
        ]
        for user in users if clients else []:
            agents.enter_context(_incumbent.oidc_agent(stub, (user.uid, user.gid)))
        time.sleep(options.settle)
        uids = {user.uid for user in users}
        brokers, running = broker_pss(uids)
        incumbents, agent_processes = agents_pss(uids)
        idle = [user for user in users[options.active :]][: options.samples]
        firsts = []
        for user in idle:
            helper = user.run(python, "first", 0, envs[user.name])
            assert helper.stdout is not None
            firsts.append(json.loads(helper.stdout.readline())["seconds"])
            helper.wait(60)
        for process in active:
            process.kill()
        for unit in units:
            unit.stop()
    shutil.rmtree(folder, ignore_errors=True)

    print(f"\n{'a login node':<52} {'value':>12}\n" + "-" * 65)
    print(f"{'users signed in / active':<52} {options.users:>5} / {options.active:<5}")
    print(f"{'idle_exit_seconds / settle (s)':<52} {options.idle_exit:>5} / {options.settle:<5g}")
    print(f"{f'brokers: total PSS MB ({running} daemons running)':<52} {brokers:>12.1f}")
    print(f"{'brokers: PSS MB per daemon running':<52} {brokers / max(running, 1):>12.1f}")
    print(f"{'event loop':<52} {'uvloop' if options.uvloop else 'asyncio':>12}")
    if clients:
        print(
            f"{f'oidc-agents: total PSS MB ({agent_processes} processes)':<52} {incumbents:>12.1f}"
        )
    else:
        print(f"{'oidc-agents':<52} {'not installed':>12}")
    first = f"idle user first GetToken p50 ms ({len(firsts)} users)"
    print(f"{first:<52} {statistics.median(firsts) * 1000:>12.0f}")
    print(f"{'idle user first GetToken p99 ms':<52} {percentile(firsts, 0.99) * 1000:>12.0f}")


if __name__ == "__main__":
    main()
