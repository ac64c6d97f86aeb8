"""A wall clock stepped back while the daemon was stopped serves no dead token after its start.

The daemon runs under libfaketime (Debian's faketime): its wall clock is off by what a
file says, read at every call, while CLOCK_BOOTTIME stays true. A device that booted
10 minutes fast signs in and renews (its state says so in its fast wall clock); the
daemon stops; NTP steps the clock back; the daemon starts again. Read in the corrected
wall clock alone, the stored token would look 10 minutes younger than it is, and be
served dead until the next re-validation: the state's age is the larger of what the
wall clock and the boot clock say. Over several lifetimes (the 200 s of a longer token,
at a 5 s one) every token served is one the provider accepts.
(tests/integration/test_wrong_clocks.py steps the clock of a running daemon;
tests/interop/test_interop_clock_jumps.py jumps it forward, as a paused VM does.)
"""

from __future__ import annotations

import time
from pathlib import Path

from signin_broker.client import BrokerClient
from signin_broker_testing import StubProvider
from signin_broker_testing.browser import Browser
from signin_broker_testing.daemon import DaemonProcess
from support.clocks import faked_clock
from support.signin import sign_in

TTL = 5
WINDOW_SECONDS = 4 * TTL  # several renewals


def test_a_restart_after_the_wall_clock_stepped_back_serves_no_dead_token(
    socket_path: Path, tmp_path: Path
) -> None:
    clock = tmp_path / "clock"
    env = faked_clock(clock, "+10m")  # a device that booted ten minutes fast
    with StubProvider(access_token_ttl=TTL, refresh_reuse_ends_grant=True) as stub:
        daemon = DaemonProcess(socket_path, "--issuer", stub.issuer, env=env).start()
        with Browser() as browser:
            assert sign_in(browser, daemon).status_code == 303
        with BrokerClient(socket_path) as client:
            client.get_token()
        daemon.stop()
        clock.write_text("+0\n")  # NTP steps the clock back by ten minutes
        with DaemonProcess(socket_path, "--issuer", stub.issuer, env=env):
            served, dead = set(), []
            with BrokerClient(socket_path, timeout=20) as client:
                started = time.monotonic()
                while time.monotonic() - started < WINDOW_SECONDS:
                    token = client.get_token()
                    info = stub.access_token_info(token.access_token)
                    assert info is not None
                    served.add(token.access_token)
                    if not info["active"]:
                        dead.append(round(time.monotonic() - started, 1))
                    time.sleep(0.25)
        assert dead == []  # seconds into the window at which a dead token was served
        assert len(served) >= 3 and stub.reuses == []  # renewed as it fell due, each once
