"""This working tree beside the tree at a git ref, measured in one run, rounds interleaved.

    python benchmarks/bench_compare.py REF [--rounds N] [--calls N] [--seconds S]

Both trees are built as pip builds them for a user (a wheel, no editable finder), each
into a folder of its own, and run on this interpreter with this venv's dependencies, so
only the code differs. Each gets its own daemon signed in to one stub provider. Every
figure is taken for both trees in alternating rounds, beside its yardstick from the same
rounds: a bare grpcio server with canned answers (`_yardstick.py`), `python -c pass`,
curl's own start-up on a socket nobody serves. Apps call with plain generated stubs, as
an app in another language does: the SDK on both sides would hide the broker's own cost.

The last column compares the tree with REF; a figure more than 5 % worse is flagged, and
the exit status is 1 when any is.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from bench_api import bare_call, one_shots, percentile, sign_in, throughput, timed_calls

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider

HERE = Path(__file__).parent
ROOT = HERE.parent
CACHE = ROOT / ".cache" / "bench-compare"
WORSE = 0.05  # a figure this much worse than REF's is flagged
CALLS_BEFORE_RSS = 1000


@dataclass
class Tree:
    """One build of the package and the daemon it runs."""

    label: str
    site: Path  # the built package: put first on PYTHONPATH
    home: Path  # its XDG folders
    daemon: subprocess.Popen[bytes] | None = None
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def socket(self) -> str:
        return str(self.home / "run" / "signin-broker" / "broker.sock")

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(self.site),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_STATE_HOME": str(self.home / "state"),
            "XDG_RUNTIME_DIR": str(self.home / "run"),
            "SIGNIN_BROKER_KEY_STORE": "file",
        }

    def command(self, name: str, *args: str) -> list[str]:
        return [sys.executable, str(self.site / "bin" / name), *args]


def build(source: Path, site: Path) -> None:
    """The wheel pip builds from `source`, installed into `site` without dependencies."""
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--target", str(site), str(source)],
        check=True,
    )  # fmt: skip


def build_ref(ref: str, folder: Path) -> Path:
    """The tree at `ref`, built once per commit and kept under .cache/bench-compare/."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = CACHE / commit
    if (site / ".built").exists():
        return site
    source = folder / f"src-{commit[:12]}"
    source.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    build(source, site)
    (site / ".built").touch()
    return site


def build_working_tree(folder: Path) -> Path:
    """This working tree as it is now, uncommitted changes included (never cached)."""
    source = folder / "src-worktree"
    shutil.copytree(
        ROOT, source,
        ignore=shutil.ignore_patterns(".git", ".venv*", ".cache", "artifacts", "node_modules",
                                      "__pycache__", "*.deb"),
    )  # fmt: skip
    site = folder / "site-worktree"
    build(source, site)
    return site


def start_daemon(tree: Tree, issuer: str) -> None:
    """The tree's daemon, signed in to the stub; returns once a token is served."""
    (tree.home / "run").mkdir(parents=True, mode=0o700)
    log = (tree.home / "daemon.log").open("wb")
    tree.daemon = subprocess.Popen(
        tree.command("signin-brokerd", "--issuer", issuer, "--http", "127.0.0.1:0"),
        env=tree.env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while b'"sign-in page ready"' not in (tree.home / "daemon.log").read_bytes():
        if tree.daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{tree.label}'s daemon did not start: see {tree.home}/daemon.log")
        time.sleep(0.05)
    with BrokerClient(tree.socket) as client:
        sign_in(client.begin_sign_in().url)
        client.get_token()


def cpu_seconds(pid: int) -> float:
    """CPU time of all of a process's threads, in nanoseconds' precision (schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


@dataclass
class Figure:
    name: str
    unit: str
    yardstick: str
    values: dict[str, float]  # "yardstick", "ref", "tree"
    lower_is_better: bool = True

    def worse(self) -> bool:
        change = self.values["tree"] / self.values["ref"] - 1
        return change > WORSE if self.lower_is_better else change < -WORSE

    def line(self) -> str:
        base, ref, tree = (self.values[k] for k in ("yardstick", "ref", "tree"))
        digits = 3 if max(ref, tree) < 10 else 1 if max(ref, tree) < 1000 else 0
        ratio = "{:.2f}x" if base else "{}"

        def cell(value: float) -> str:
            return f"{value:,.{digits}f}" if value else ""

        flag = "  WORSE" if self.worse() else ""
        return (
            f"{self.name + ' (' + self.unit + ')':<40} {cell(base):>11} {cell(ref):>11} "
            f"{cell(tree):>11} {ratio.format(ref / base) if base else '':>8} "
            f"{ratio.format(tree / base) if base else '':>8} {tree / ref:>8.3f}{flag}"
        )


def measure(trees: dict[str, Tree], bare_socket: str, options: argparse.Namespace) -> list[Figure]:
    ref, tree = trees["ref"], trees["tree"]
    figures: list[Figure] = []

    rss, cpu = {}, {}
    for key, each in trees.items():
        call = bare_call(each.socket, "GetToken")
        assert each.daemon is not None
        daemon = psutil.Process(each.daemon.pid)
        for _ in range(CALLS_BEFORE_RSS):
            call()
        rss[key] = daemon.memory_info().rss / 2**20
        # The daemon's own CPU time per call: what a busy machine disturbs least.
        before = cpu_seconds(daemon.pid)
        for _ in range(options.calls):
            call()
        cpu[key] = (cpu_seconds(daemon.pid) - before) / options.calls * 1e6

    sockets = {"yardstick": bare_socket, "ref": ref.socket, "tree": tree.socket}
    samples: dict[str, list[float]] = {key: [] for key in sockets}
    calls = {key: bare_call(path, "GetToken") for key, path in sockets.items()}
    order = list(sockets)
    for round_ in range(options.rounds):
        for key in order[round_ % 3 :] + order[: round_ % 3]:  # each goes first in turn
            samples[key] += timed_calls(calls[key], options.calls)
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        figures.append(
            Figure(
                f"GetToken {label}, plain stubs",
                "ms",
                "bare grpcio",
                {key: percentile(values, fraction) * 1000 for key, values in samples.items()},
            )
        )

    rates: dict[str, list[float]] = {key: [] for key in sockets}
    for _ in range(options.throughput_rounds):
        for key, path in sockets.items():
            rates[key].append(throughput("bare", path, "GetToken", 16, options.seconds))
    figures.append(
        Figure(
            "GetToken calls/s, 16 clients",
            "calls/s",
            "bare grpcio",
            {key: statistics.median(values) for key, values in rates.items()},
            lower_is_better=False,
        )
    )

    curl = [
        "curl", "-s", "--fail", "--unix-socket", "SOCKET", "-d", "{}",
        "-H", "Content-Type: application/json",
        "http://broker/signin_broker.v1.TokenBroker/GetToken",
    ]  # fmt: skip

    def with_socket(path: str) -> list[str]:
        return [path if part == "SOCKET" else part for part in curl]

    runs = options.one_shots
    python_pass, ref_token, tree_token = timed_one_shots(
        [
            ([sys.executable, "-c", "pass"], None),
            (ref.command("signin-broker", "token"), ref.env),
            (tree.command("signin-broker", "token"), tree.env),
        ],
        runs,
    )
    figures.append(
        Figure(
            "`signin-broker token` one-shot",
            "ms",
            "python -c pass",
            {"yardstick": python_pass * 1000, "ref": ref_token * 1000, "tree": tree_token * 1000},
        )
    )
    (curl_alone,) = one_shots([with_socket("/nonexistent/broker.sock")], runs, check=False)
    curl_ref, curl_tree = one_shots([with_socket(ref.socket), with_socket(tree.socket)], runs)
    figures.append(
        Figure(
            "a token with curl (JSON path)",
            "ms",
            "curl alone",
            {"yardstick": curl_alone * 1000, "ref": curl_ref * 1000, "tree": curl_tree * 1000},
        )
    )
    figures.append(
        Figure(
            "daemon CPU time per GetToken",
            "us",
            "",
            {"yardstick": 0.0, "ref": cpu["ref"], "tree": cpu["tree"]},
        )
    )
    figures.append(
        Figure(
            f"daemon RSS after {CALLS_BEFORE_RSS} calls",
            "MB",
            "",
            {"yardstick": 0.0, "ref": rss["ref"], "tree": rss["tree"]},
        )
    )
    return figures


def timed_one_shots(
    commands: list[tuple[list[str], dict[str, str] | None]], runs: int
) -> list[float]:
    """Median wall time of each whole command, the runs interleaved."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for (args, env), samples in zip(commands, times, strict=True):
            began = time.perf_counter()
            subprocess.run(args, env=env, capture_output=True, check=True)
            samples.append(time.perf_counter() - began)
    return [statistics.median(samples) for samples in times]


@contextlib.contextmanager
def yardstick(socket_path: str) -> Iterator[None]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "_yardstick.py"), socket_path], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()  # "ready"
        yield
    finally:
        process.terminate()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref", help="the git ref to compare with (a commit, tag or branch)")
    parser.add_argument("--rounds", type=int, default=6, help="latency rounds per server")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls per round")
    parser.add_argument("--seconds", type=float, default=2.0, help="each throughput run")
    parser.add_argument("--throughput-rounds", type=int, default=3)
    parser.add_argument("--one-shots", type=int, default=31, help="runs of each one-shot")
    options = parser.parse_args()

    CACHE.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="sb-compare-", dir="/tmp"))
    trees: dict[str, Tree] = {}
    stub = None
    try:
        print(f"building {options.ref} and the working tree ...", file=sys.stderr)
        trees["ref"] = Tree(options.ref, build_ref(options.ref, folder), folder / "ref")
        trees["tree"] = Tree("working tree", build_working_tree(folder), folder / "tree")
        stub = StubProvider().start()
        for tree in trees.values():
            start_daemon(tree, stub.issuer)
        bare_socket = str(folder / "bare.sock")
        with yardstick(bare_socket):
            figures = measure(trees, bare_socket, options)
    finally:
        for tree in trees.values():
            if tree.daemon is not None:
                tree.daemon.terminate()
                tree.daemon.wait()
        if stub is not None:
            stub.stop()
        shutil.rmtree(folder, ignore_errors=True)

    print(
        f"{'figure':<40} {'yardstick':>11} {options.ref[:11]:>11} {'this tree':>11} "
        f"{'ref/yard':>8} {'tree/yard':>8} {'tree/ref':>8}"
    )
    print("-" * 104)
    for figure in figures:
        print(figure.line())
    print(
        f"\nyardsticks: {', '.join(f'{f.name}: {f.yardstick}' for f in figures if f.yardstick)}"
        f"\n{os.cpu_count()} CPUs; {options.rounds} latency rounds of {options.calls} calls each,"
        f" interleaved; {options.throughput_rounds} throughput rounds of {options.seconds:g} s;"
        f" one-shots: median of {options.one_shots}. WORSE: more than {WORSE:.0%} worse than"
        f" {options.ref}."
    )
    return 1 if any(figure.worse() for figure in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
