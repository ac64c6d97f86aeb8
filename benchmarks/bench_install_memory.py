"""The daemon's memory as `pip install signin-broker` installs it, beside this environment's.

    python benchmarks/bench_install_memory.py      # builds a base install in a temp venv

The development environment carries uvloop (an extra) and trio (selenium's); a base
install has neither. Each install runs a daemon against the stub provider: its RSS idle,
then signed in through the page after 1,000 GetToken calls, with `python -c pass`'s own
RSS from the same interpreter as the yardstick. Nothing is asserted.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 2

MEASURE = """
import sys, time
from signin_broker.client import BrokerClient
from signin_broker.testing import StubProvider
from signin_broker.testing.browser import Browser, location
from signin_broker.testing.daemon import DaemonProcess, short_temp_dir

def rss(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(l.split()[1]) / 1024 for l in status if l.startswith("VmRSS:"))

with StubProvider() as stub:
    socket = short_temp_dir() / "run" / "broker.sock"
    with DaemonProcess(socket, "--issuer", stub.issuer, "--key-store", "file") as daemon:
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


def measure(python: str) -> tuple[float, float, float, bool]:
    """python -c pass's RSS, the daemon's idle and signed-in RSS, and whether uvloop ran."""
    yardstick = float(subprocess.run([python, "-c", PYTHON_RSS], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip
    idle, signed_in, uvloop = subprocess.run(
        [python, "-c", MEASURE], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split()
    return yardstick, float(idle), float(signed_in), uvloop == "True"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="sb-install-") as folder:
        base = Path(folder) / "venv"
        venv.create(base, with_pip=True)
        python = str(base / "bin" / "python")
        wheels = [str(ROOT), str(ROOT / "packaging" / "testing")]  # the stub comes with testing
        subprocess.run([python, "-m", "pip", "install", "-q", *wheels], check=True)
        print(f"{'install':<28} {'python -c pass':>15} {'idle':>8} {'signed in':>10}  event loop")
        for _ in range(RUNS):  # interleaved: the machine's slow moments fall on both
            for name, interpreter in (
                ("base (pip install)", python),
                ("this environment", sys.executable),
            ):
                yardstick, idle, signed_in, uvloop = measure(interpreter)
                loop = "uvloop" if uvloop else "asyncio"
                print(
                    f"{name:<28} {yardstick:>12.1f} MB {idle:>5.1f} MB {signed_in:>7.1f} MB  {loop}"
                )


if __name__ == "__main__":
    main()
