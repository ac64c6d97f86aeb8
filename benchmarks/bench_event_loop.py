"""Whether uvloop pays for its 13 MB: the daemon on uvloop beside the daemon on asyncio.

    python benchmarks/bench_event_loop.py     # prints a table; nothing is asserted

Two daemons of this installation, signed in to the same stub provider, one forced onto
the standard library's event loop (uvloop made unimportable in its process), are
called alternately in the same run: GetToken latency from one client, calls per second
from 16, start-up to ready, and resident memory after the calls. uvloop is used when
it is installed (`signin-broker[uvloop]`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import psutil
from bench_api import BIN, latencies, percentile, sign_in, start, throughput

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider

# The daemon's entry point with uvloop unimportable: the same code on asyncio's own loop.
ON_ASYNCIO = (
    "import sys; sys.modules['uvloop'] = None; "
    "from signin_broker.daemon.main import main; sys.exit(main())"
)
LOOPS = {
    "asyncio": [sys.executable, "-c", ON_ASYNCIO],
    "uvloop": [str(BIN / "signin-brokerd")],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="sequential calls per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the loops")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of throughput runs")
    options = parser.parse_args()
    try:
        import uvloop  # noqa: F401 - only whether it is there
    except ImportError:
        sys.exit("uvloop is not installed: pip install 'signin-broker[uvloop]' to compare")

    folder = Path(tempfile.mkdtemp(prefix="sb-loops-", dir="/tmp"))
    stub = StubProvider().start()
    daemons = {}
    sockets = {name: str(folder / name / "broker.sock") for name in LOOPS}
    starts: dict[str, list[float]] = {name: [] for name in LOOPS}
    try:
        for _ in range(5):  # start-up to ready, alternating
            for name, command in LOOPS.items():
                daemon, seconds = start([*command, "--socket", sockets[name]], '"msg":"ready"')
                starts[name].append(seconds * 1000)
                daemon.terminate()
                daemon.wait()
        for name, command in LOOPS.items():
            daemons[name], _ = start(
                [*command, "--socket", sockets[name], "--issuer", stub.issuer,
                 "--http", "127.0.0.1:0", "--key-store", "file"],
                '"msg":"sign-in page ready"',
            )  # fmt: skip
            with BrokerClient(sockets[name]) as client:
                sign_in(client.begin_sign_in().url)
                client.get_token()
        samples: dict[str, list[float]] = {name: [] for name in LOOPS}
        for _ in range(options.rounds):
            for name in LOOPS:
                samples[name] += latencies("broker", sockets[name], "GetToken", options.calls)
        rates = {
            name: throughput("broker", sockets[name], "GetToken", 16, options.seconds)
            for name in LOOPS
        }
        rss = {name: psutil.Process(d.pid).memory_info().rss / 2**20 for name, d in daemons.items()}
    finally:
        for daemon in daemons.values():
            daemon.terminate()
            daemon.wait()
        stub.stop()

    def line(figure: str, asyncio_value: float, uvloop_value: float, form: str) -> str:
        ratio = uvloop_value / asyncio_value
        return f"{figure:<40}{asyncio_value:>12{form}}{uvloop_value:>12{form}}{ratio:>9.2f}x"

    print(f"{'figure':<40}{'asyncio':>12}{'uvloop':>12}{'ratio':>10}")
    print("-" * 74)
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        values = [percentile(samples[name], fraction) * 1000 for name in LOOPS]
        print(line(f"GetToken {label} latency (ms), 1 client", *values, ".3f"))
    print(line("GetToken calls/s, 16 clients", rates["asyncio"], rates["uvloop"], ",.0f"))
    medians = [statistics.median(starts[name]) for name in LOOPS]
    print(line("start to ready (ms), median of 5", *medians, ".0f"))
    print(line("daemon RSS after the calls (MB)", rss["asyncio"], rss["uvloop"], ".1f"))
    print(
        f"\n{psutil.cpu_count()} CPUs; {options.rounds} rounds of {options.calls} calls;"
        " clients are separate processes."
    )


if __name__ == "__main__":
    main()
