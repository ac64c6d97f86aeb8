"""Session events and their fan-out to any number of watchers.

Each watcher has a bounded queue. Publishing never waits: a watcher that falls
behind by a whole queue is dropped (its stream ends and it can watch again), so
one stuck app cannot hold the daemon's memory or its other watchers hostage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ...states import EventKind
from .records import RECORD_VERSION

if TYPE_CHECKING:
    from .records import Entitlement

WATCHER_QUEUE_SIZE = 256


@dataclass(frozen=True, slots=True)
class EndedSession:
    """A session that ended without anyone asking: the person must sign in again."""

    account: str
    display_name: str
    kind: EventKind  # REVOKED, or SIGNED_OUT when its token expired unrenewable
    reason: str
    ended_at: float

    def to_record(self) -> dict[str, Any]:
        """What the store keeps in the account's place until it signs in again (no tokens)."""
        return {"version": RECORD_VERSION, "ended": {**asdict(self), "kind": self.kind.value}}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> EndedSession | None:
        """Back from to_record(); None for an account's record."""
        ended = record.get("ended")
        if not isinstance(ended, dict):
            return None
        return cls(
            str(ended["account"]),
            str(ended["display_name"]),
            EventKind(ended["kind"]),
            str(ended["reason"]),
            float(ended["ended_at"]),
        )


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One event; `detail` is a human sentence and never holds a secret."""

    kind: EventKind
    account: str = ""
    detail: str = ""
    sign_in_id: str = ""  # set on the outcome of a sign-in begun with BeginSignIn
    owner: str = ""  # who began that sign-in (records.owner_key); "" when nobody did
    occurred_at: float = field(default_factory=time.time)
    ended: EndedSession | None = None  # the session ended by itself: the person must know
    restart_signs_out: bool = False  # DEGRADED: a restart now would lose a session
    step_up: bool = False  # SIGN_IN_PROGRESS: a token request waits for a stronger sign-in

    def concerns(self, entitlement: Entitlement, owners: frozenset[str]) -> bool:
        """Whether a watcher with this entitlement, owning these sign-ins, may be told.

        An account's events go to those who may see the account; a sign-in that has
        no account yet (a device code waiting, a failure) only to its owner, or when
        nobody owns it (begun on the loopback page) to watchers who see every account;
        the provider's health to every watcher.
        """
        if self.account:
            return entitlement.sees(self.account)
        if self.sign_in_id or self.kind in (EventKind.SIGN_IN_PROGRESS, EventKind.SIGN_IN_FAILED):
            if self.owner:
                return self.owner in owners
            return entitlement.accounts is None
        return True


class WatcherDropped(Exception):
    """The watcher fell too far behind and was dropped, or the bus closed."""


class Subscription:
    """A watcher's view of the bus: await `next()` for each event in order.

    A list and, while the watcher waits, one future: an asyncio.Queue would cost a
    watcher four deques and an Event (about 3 KB), and a daemon may have a thousand.
    """

    __slots__ = ("_ended", "_events", "_waiter", "dropped_because", "own")

    def __init__(self, own: bool = False) -> None:
        self._events: list[SessionEvent] = []  # at most WATCHER_QUEUE_SIZE, oldest first
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self.dropped_because = ""
        self.own = own  # the daemon's own (its notices), no app's: no work of its own

    def offer(self, event: SessionEvent) -> bool:
        """Queue an event; False when the queue is full."""
        if len(self._events) >= WATCHER_QUEUE_SIZE:
            return False
        self._events.append(event)
        self._wake()
        return True

    def end(self, reason: str) -> None:
        """End the stream after what is queued, or at once when the queue is full."""
        self.dropped_because = reason
        self._ended = True
        if len(self._events) >= WATCHER_QUEUE_SIZE:  # what is queued is lost with the watcher
            self._events.clear()
        self._wake()

    async def next(self) -> SessionEvent:
        """The next event; raises WatcherDropped when the stream has ended."""
        while not self._events:
            if self._ended:
                raise WatcherDropped(self.dropped_because)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._events.pop(0)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class EventBus:
    """Publishes session events to every current subscriber."""

    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()
        self._closed_because = ""

    def publish(self, event: SessionEvent) -> None:
        """Deliver to every watcher now; drop those whose queue is full."""
        for subscription in list(self._subscribers):
            if not subscription.offer(event):
                self._subscribers.discard(subscription)
                subscription.end("the watcher fell behind; watch again to catch up")

    @contextmanager
    def subscribe(self, own: bool = False) -> Iterator[Subscription]:
        """Receive every event published while the block runs (`own`: the daemon itself)."""
        subscription = Subscription(own)
        if self._closed_because:
            subscription.end(self._closed_because)
        self._subscribers.add(subscription)
        try:
            yield subscription
        finally:
            self._subscribers.discard(subscription)

    def close(self, reason: str) -> None:
        """End every watch, now and later; used when the daemon stops."""
        self._closed_because = reason
        for subscription in list(self._subscribers):
            subscription.end(reason)
        self._subscribers.clear()

    def __len__(self) -> int:
        return len(self._subscribers)

    @property
    def watchers(self) -> int:
        """The subscribers that watch for an app (the daemon's own not counted)."""
        return sum(not subscription.own for subscription in self._subscribers)
