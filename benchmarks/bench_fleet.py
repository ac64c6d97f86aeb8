"""A fleet of devices on one provider: how evenly do their daemons spread the load?

    python benchmarks/bench_fleet.py [--devices 100000] [--minutes 120]

Simulates, with the daemon's own timing policy (signin_broker.session.schedule), each
device's background renewals and re-validations, and prints the provider's requests
per minute: the peak minute against the mean (target: no minute above 1.2x the mean).
Two worst cases: every device signs in in the same second (a fresh roll-out), and
every device restarts in the same second with tokens of all ages (after a power cut).
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections import Counter

from signin_broker.daemon.options import OPTIONS
from signin_broker.session import schedule

TOKEN_LIFETIME = 3600.0
# The shipped default, and a provider's userinfo answer time as the daemon measures it.
REVALIDATE_SECONDS = float(
    next(option.default() for option in OPTIONS if option.name == "revalidate_seconds")  # type: ignore[arg-type]
)
ANSWER_SECONDS = 0.3


def renewal_after(issued_at: float) -> float:
    """When a daemon renews a token issued at issued_at (TokenSet.refresh_due_at)."""
    return schedule.renewal_due_at(issued_at, TOKEN_LIFETIME, schedule.refresh_early_fraction())


def revalidation_after(checked_at: float) -> float:
    """When a daemon re-validates a session the provider vouched for at checked_at."""
    return schedule.next_revalidation(checked_at, REVALIDATE_SECONDS, ANSWER_SECONDS)


def simulate(devices: int, minutes: int, scenario: str) -> Counter[int]:
    """Requests to the provider per minute, over `minutes` after t=0.

    A renewal counts as a re-validation (ProviderHealth.answered): it moves the
    device's next re-validation, and the one it replaces is dropped from the queue.
    """
    horizon = minutes * 60.0
    per_minute: Counter[int] = Counter()
    events: list[tuple[float, int, str]] = []  # (when, device, "refresh" | "revalidate")
    next_check: dict[int, float] = {}
    for device in range(devices):
        if scenario == "sign-in together":
            issued = 0.0
            next_check[device] = revalidation_after(0.0)
        else:  # restart together: tokens issued at any time in the hour before
            issued = -random.uniform(0, TOKEN_LIFETIME * schedule.REFRESH_AT_FRACTION)
            next_check[device] = schedule.first_revalidation(
                0.0, REVALIDATE_SECONDS, ANSWER_SECONDS
            )
        heapq.heappush(events, (max(renewal_after(issued), 0.0), device, "refresh"))
        heapq.heappush(events, (next_check[device], device, "revalidate"))
    while events:
        when, device, kind = heapq.heappop(events)
        if when >= horizon:
            break
        if kind == "revalidate" and when != next_check[device]:
            continue  # a renewal re-validated it meanwhile
        per_minute[int(when // 60)] += 1
        if kind == "refresh":
            heapq.heappush(events, (renewal_after(when), device, "refresh"))
        next_check[device] = revalidation_after(when)
        heapq.heappush(events, (next_check[device], device, "revalidate"))
    return per_minute


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100_000)
    parser.add_argument("--minutes", type=int, default=120)
    options = parser.parse_args()
    columns = ("mean/min", "peak/min", "peak minute", "peak/mean", "per device")
    print(f"{'scenario':<22} " + " ".join(f"{c:>11}" for c in columns) + "  target")
    for scenario in ("sign-in together", "restart together"):
        per_minute = simulate(options.devices, options.minutes, scenario)
        counts = [per_minute[m] for m in range(options.minutes)]
        mean = sum(counts) / len(counts)
        peak = max(counts)
        print(
            f"{scenario:<22} {mean:>11,.0f} {peak:>11,.0f} {counts.index(peak):>11} "
            f"{peak / mean:>10.2f}x {mean / options.devices:>11.2f}"
            "  peak <= 1.2x mean; <= 1.1 a device a minute"
        )
    print(
        f"\n{options.devices:,} devices, {options.minutes} minutes, tokens of"
        f" {TOKEN_LIFETIME:.0f} s, revalidate_seconds {REVALIDATE_SECONDS:.0f} (the default),"
        f" userinfo answering in {ANSWER_SECONDS:g} s; requests are renewals plus"
        " re-validations (userinfo), a renewal counting as a re-validation."
    )


if __name__ == "__main__":
    main()
