"""The event bus: ordered delivery, bounded queues, slow watchers dropped, clean close."""

from __future__ import annotations

import asyncio

import pytest

from signin_broker.session.accounts.events import (
    WATCHER_QUEUE_SIZE,
    EventBus,
    EventKind,
    SessionEvent,
    WatcherDropped,
)


def test_every_watcher_gets_every_event_in_order() -> None:
    async def scenario() -> None:
        bus = EventBus()
        with bus.subscribe() as first, bus.subscribe() as second:
            for kind in (EventKind.SIGNED_IN, EventKind.REFRESHED, EventKind.SIGNED_OUT):
                bus.publish(SessionEvent(kind, account="user:1"))
            for watcher in (first, second):
                kinds = [(await watcher.next()).kind for _ in range(3)]
                assert kinds == [EventKind.SIGNED_IN, EventKind.REFRESHED, EventKind.SIGNED_OUT]
        assert len(bus) == 0

    asyncio.run(scenario())


def test_a_watcher_that_falls_behind_is_dropped_without_blocking_others() -> None:
    async def scenario() -> None:
        bus = EventBus()
        with bus.subscribe() as slow, bus.subscribe() as fast:
            for _ in range(WATCHER_QUEUE_SIZE):
                bus.publish(SessionEvent(EventKind.REFRESHED))
                await fast.next()
            bus.publish(SessionEvent(EventKind.REVOKED))  # one more than slow can hold
            assert (await fast.next()).kind is EventKind.REVOKED
            with pytest.raises(WatcherDropped, match="fell behind"):
                while True:
                    await slow.next()
            assert len(bus) == 1

    asyncio.run(scenario())


def test_close_ends_current_and_later_watches() -> None:
    async def scenario() -> None:
        bus = EventBus()
        with bus.subscribe() as watcher:
            waiting = asyncio.ensure_future(watcher.next())
            await asyncio.sleep(0)
            bus.close("the daemon is stopping")
            with pytest.raises(WatcherDropped, match="stopping"):
                await waiting
        with bus.subscribe() as late, pytest.raises(WatcherDropped):
            await late.next()

    asyncio.run(scenario())
