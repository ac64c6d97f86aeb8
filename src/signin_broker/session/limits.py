"""Bounds on what callers can make the daemon hold and ask: cached scoped tokens, new grants.

Every distinct audience or scope set costs a refresh grant at the provider and a cached
token here. Without bounds, one app naming a thousand audiences made a thousand grants
in seconds and grew the daemon's memory without end.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

from .errors import TooManyNewTokens
from .tokens import TokenSet

ScopedKey = tuple[frozenset[str], str]  # (scopes, audience) of a down-scoped token

# Far more than an app needs (a handful of APIs), small enough to cost little memory.
MAX_SCOPED_TOKENS = 256
# Per app: this many scoped grants at once, then this many a second.
GRANT_BURST = 20
GRANTS_PER_SECOND = 2.0
# Buckets kept at most; one that has filled up again is the same as none.
MAX_TRACKED_APPS = 1024


class ScopedTokens:
    """An account's down-scoped tokens, at most `limit`: expired ones go first, then the LRU."""

    def __init__(self, limit: int = MAX_SCOPED_TOKENS) -> None:
        self.limit = limit
        self._tokens: OrderedDict[ScopedKey, TokenSet] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tokens)

    def get(self, key: ScopedKey) -> TokenSet | None:
        """The cached token, now the most recently used; None when there is none."""
        token = self._tokens.get(key)
        if token is not None:
            self._tokens.move_to_end(key)
        return token

    def put(self, key: ScopedKey, token: TokenSet, now: float) -> None:
        """Keep the token, making room first when the cache is full."""
        self._tokens.pop(key, None)
        if len(self._tokens) >= self.limit:
            for stale in [k for k, t in self._tokens.items() if not t.is_valid(now)]:
                del self._tokens[stale]
        while len(self._tokens) >= self.limit:
            self._tokens.popitem(last=False)
        self._tokens[key] = token


class GrantBudget:
    """A token bucket per app for scoped grants at the provider: a burst, then a steady rate."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        burst: int = GRANT_BURST,
        per_second: float = GRANTS_PER_SECOND,
        max_apps: int = MAX_TRACKED_APPS,
    ) -> None:
        self._clock = clock
        self._burst = burst
        self._per_second = per_second
        self._max_apps = max_apps
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # app: (left, at)

    def take(self, app: str) -> None:
        """Spend one grant of the app's budget; TooManyNewTokens says how long to wait."""
        now = self._clock()
        left = self._left(app, now)
        self._buckets.pop(app, None)
        if left < 1:
            self._buckets[app] = (left, now)
            raise TooManyNewTokens(math.ceil((1 - left) / self._per_second))
        self._buckets[app] = (left - 1, now)
        self._forget_the_idle(now)

    def _left(self, app: str, now: float) -> float:
        left, at = self._buckets.get(app, (float(self._burst), now))
        return min(float(self._burst), left + max(now - at, 0.0) * self._per_second)

    def _forget_the_idle(self, now: float) -> None:
        if len(self._buckets) <= self._max_apps:
            return
        for app in [app for app in self._buckets if self._left(app, now) >= self._burst]:
            del self._buckets[app]
        while len(self._buckets) > self._max_apps:
            self._buckets.popitem(last=False)
