"""The token lifecycle under load: callers during a renewal, and down-scoped tokens.

    python benchmarks/bench_lifecycle.py

Starts the stub provider and a signed-in daemon, then prints a table:
- 200 concurrent GetToken calls while a renewal is in flight at a slow provider
  (1 s), for callers whose token is still good and for callers that need the new one,
  with the number of refresh requests that reached the provider;
- repeated down-scoped GetToken calls, and how many reached the provider.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_api import BIN, percentile, sign_in, start

from signin_broker.client import AsyncBrokerClient, BrokerClient
from signin_broker_testing import StubProvider

PROVIDER_DELAY_SECONDS = 1.0


async def timed_calls(socket_path: str, count: int, **kwargs: object) -> list[float]:
    """Latency of `count` concurrent GetToken calls, each from its own connection."""
    clients = [AsyncBrokerClient(socket_path, timeout=30) for _ in range(count)]
    await asyncio.gather(*(client.status() for client in clients))  # connected first

    async def one(client: AsyncBrokerClient) -> float:
        began = time.perf_counter()
        await client.get_token(**kwargs)  # type: ignore[arg-type]
        return time.perf_counter() - began

    try:
        return list(await asyncio.gather(*(one(client) for client in clients)))
    finally:
        await asyncio.gather(*(client.close() for client in clients))


async def during_a_renewal(socket_path: str, stub: StubProvider, **kwargs: object) -> list[float]:
    """Start a renewal at a slow provider, then time 200 callers while it is in flight."""
    stub.delay_token_response(PROVIDER_DELAY_SECONDS, after_processing=False)
    async with AsyncBrokerClient(socket_path, timeout=30) as trigger:
        renewal = asyncio.ensure_future(trigger.get_token(min_ttl_seconds=3000))
        await asyncio.sleep(0.1)  # the renewal is now waiting at the provider
        latencies = await timed_calls(socket_path, 200, **kwargs)
        await renewal
    return latencies


def row(name: str, value: str, target: str = "") -> str:
    return f"{name:<88} {value:>16}  {target}"


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="sb-bench-", dir="/tmp"))
    socket_path = str(folder / "run" / "broker.sock")
    stub = StubProvider().start()
    daemon = None
    try:
        daemon, _ = start(
            [str(BIN / "signin-brokerd"), "--socket", socket_path, "--issuer", stub.issuer,
             "--http", "127.0.0.1:0"],
            '"msg":"sign-in page ready"',
        )  # fmt: skip
        with BrokerClient(socket_path) as client:
            sign_in(client.begin_sign_in().url)
            client.get_token()
        lines = [row("figure", "measured", "target"), "-" * 120]

        for label, kwargs in (
            ("token still good (min_ttl 0)", {}),
            ("token must be renewed (min_ttl 3000)", {"min_ttl_seconds": 3000}),
        ):
            stub.access_token_ttl = 60  # the current token will not last 3000 s
            with BrokerClient(socket_path) as client:
                client.get_token(min_ttl_seconds=3600)  # renewed now, for 60 s
            stub.access_token_ttl = 3600
            before = len(stub.token_requests("refresh_token"))
            latencies = asyncio.run(during_a_renewal(socket_path, stub, **kwargs))
            refreshes = len(stub.token_requests("refresh_token")) - before
            p50, p99 = (percentile(latencies, q) * 1000 for q in (0.5, 0.99))
            lines.append(
                row(
                    f"200 callers during a 1 s renewal, {label}: p50 / p99 (ms)",
                    f"{p50:.1f} / {p99:.1f}",
                )
            )
            lines.append(row("  refresh requests at the provider", str(refreshes), "exactly 1"))

        with BrokerClient(socket_path) as client:
            before = len(stub.token_requests())
            main_samples, scoped_samples = [], []
            for _ in range(2000):
                began = time.perf_counter()
                client.get_token(scopes=["openid", "email"])
                scoped_samples.append(time.perf_counter() - began)
                began = time.perf_counter()
                client.get_token()
                main_samples.append(time.perf_counter() - began)
            asked = len(stub.token_requests()) - before
        lines.append(
            row("2,000 down-scoped GetToken calls: provider requests", str(asked), "1 (the first)")
        )
        lines.append(
            row(
                "  p50 latency down-scoped / full token (ms)",
                f"{statistics.median(scoped_samples) * 1000:.3f} / "
                f"{statistics.median(main_samples) * 1000:.3f}",
            )
        )
        print("\n".join(lines))
    finally:
        stub.stop()
        if daemon is not None:
            daemon.terminate()
            daemon.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
