"""Watching a daemon's session events from a test, in a background thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from signin_broker.client import BrokerClient, BrokerError, Event, EventKind


class EventLog:
    """The events seen so far, and a bounded wait for the next of a kind."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._arrived = threading.Condition()

    def add(self, event: Event) -> None:
        with self._arrived:
            self.events.append(event)
            self._arrived.notify_all()

    def wait_for(self, kind: EventKind, timeout: float = 30.0) -> Event:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                for event in self.events:
                    if event.kind is kind:
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {kind} event within {timeout} s: {self.events}")
                self._arrived.wait(left)

    def kinds(self) -> list[EventKind]:
        return [event.kind for event in self.events]


@contextmanager
def watching(socket_path: Path) -> Iterator[EventLog]:
    """Collect the daemon's events while the block runs (the snapshot is already in)."""
    log = EventLog()
    client = BrokerClient(socket_path)
    started = threading.Event()

    def run() -> None:
        try:
            for event in client.watch_events():
                log.add(event)
                started.set()
        except BrokerError:
            pass  # closed by us, or the daemon stopped

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield log
    finally:
        client.close()
        thread.join(10)
