"""The daemon's memory as `pip install signin-broker` installs it, beside this environment's.

    python benchmarks/bench_install_memory.py      # builds a base install in a temp venv

The development environment carries uvloop (an extra) and trio (selenium's); a base
install has neither. Each install runs a daemon against the stub provider: its RSS idle,
then signed in through the page after 1,000 GetToken calls, with `python -c pass`'s own
RSS from the same interpreter as the yardstick. Each runs with the key in a file
(`key_store = "file"`) and, where Debian's dbus and gnome-keyring are installed, in a
real Secret Service (the default `key_store = "keyring"`: keyring, secretstorage and
jeepney load). The daemons run without SSL_CERT_FILE and SSL_CERT_DIR, as a service
manager starts them: a bundle named there is parsed whole (1.4 MB; oidc/trust.py).
Nothing is asserted.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import venv
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the tests' real Secret Service

import pytest  # noqa: E402

from support.secret_service import secret_service  # noqa: E402

RUNS = 2
# Variables a shell may carry that a service manager's environment does not.
SHELL_ONLY_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")

MEASURE = """
import sys, time
from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser, location
from signin_broker_testing.daemon import DaemonProcess, short_temp_dir

def rss(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(l.split()[1]) / 1024 for l in status if l.startswith("VmRSS:"))

with StubProvider() as stub:
    socket = short_temp_dir() / "run" / "broker.sock"
    with DaemonProcess(socket, "--issuer", stub.issuer, "--key-store", sys.argv[1]) as daemon:
        idle = rss(daemon.pid)
        with Browser() as browser:
            callback = daemon.web_url + "/auth/oauth2/id-provider/callback"
            browser.get(location(browser.follow(browser.get(daemon.web_url + "/user/login"),
                                                until=callback)))
        with BrokerClient(socket) as client:
            for _ in range(1000):
                client.get_token()
        time.sleep(1)
        uvloop = "uvloop" in open(f"/proc/{daemon.pid}/maps").read()
        print(idle, rss(daemon.pid), uvloop)
"""
PYTHON_RSS = (
    "print(next(int(l.split()[1]) / 1024 for l in open('/proc/self/status')"
    " if l.startswith('VmRSS:')))"
)


def measure(python: str, key_store: str, env: dict[str, str]) -> tuple[float, float, float, bool]:
    """python -c pass's RSS, the daemon's idle and signed-in RSS, and whether uvloop ran."""
    yardstick = float(subprocess.run([python, "-c", PYTHON_RSS], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip
    idle, signed_in, uvloop = subprocess.run(
        [python, "-c", MEASURE, key_store],
        capture_output=True, text=True, check=True, timeout=300, env=env,
    ).stdout.split()  # fmt: skip
    return yardstick, float(idle), float(signed_in), uvloop == "True"


@contextlib.contextmanager
def key_stores(folder: Path) -> Iterator[list[tuple[str, dict[str, str]]]]:
    """The key stores to measure with, each with the environment its daemon needs."""
    stores = [("file", dict(os.environ))]
    with contextlib.ExitStack() as stack:
        try:
            stores.append(("keyring", stack.enter_context(secret_service(folder / "home"))))
        except pytest.skip.Exception as missing:  # a laptop without gnome-keyring
            print(f"key_store = keyring not measured: {missing}")
        yield [(name, _as_a_service(env)) for name, env in stores]


def _as_a_service(env: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name not in SHELL_ONLY_VARIABLES}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sb-install-") as folder:
        base = Path(folder) / "venv"
        venv.create(base, with_pip=True)
        python = str(base / "bin" / "python")
        wheels = [str(ROOT), str(ROOT / "packaging" / "testing")]  # the stub comes with testing
        subprocess.run([python, "-m", "pip", "install", "-q", *wheels], check=True)
        print(
            f"{'install':<20} {'key store':<9} {'python -c pass':>15} {'idle':>8} {'signed in':>10}"
            "  event loop"
        )
        with key_stores(Path(folder)) as stores:
            for _ in range(RUNS):  # interleaved: the machine's slow moments fall on all
                for key_store, env in stores:
                    for name, interpreter in (
                        ("base (pip install)", python),
                        ("this environment", sys.executable),
                    ):
                        yardstick, idle, signed_in, uvloop = measure(interpreter, key_store, env)
                        loop = "uvloop" if uvloop else "asyncio"
                        print(
                            f"{name:<20} {key_store:<9} {yardstick:>12.1f} MB {idle:>5.1f} MB"
                            f" {signed_in:>7.1f} MB  {loop}"
                        )


if __name__ == "__main__":
    main()
