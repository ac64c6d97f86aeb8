"""The provider's clock as this device carries it between answers: for DPoP proofs' `iat`.

Each answer's Date header says the provider's time (to the second). A proof signed
later needs the provider's time then: the Date carried forward by the time that has
passed since. The wall clock alone would not do: NTP steps it (a proof signed after a
step back of ten minutes would be ten minutes old to the provider, and every renewal
refused until the next answer). So, as the sessions' clock does (session.clock), what
passed is the larger of what the wall clock and the boot clock say: a step back is
ignored, and a virtual machine's pause, which the boot clock does not count, is not.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import time
from collections.abc import Callable

# Counts suspend on Linux; elsewhere the monotonic clock.
_BOOT = functools.partial(time.clock_gettime, getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC))


class ProviderClock:
    """The provider's time: its last Date header, advanced as this device's clocks say."""

    def __init__(
        self, wall: Callable[[], float] = time.time, boot: Callable[[], float] = _BOOT
    ) -> None:
        self._wall, self._boot = wall, boot
        self._told: tuple[float, float, float] | None = None  # its time, our wall and boot then

    def heard(self, date: str | None) -> None:
        """An answer's Date header (ignored when absent or malformed)."""
        if not date:
            return
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            told = email.utils.parsedate_to_datetime(date).timestamp()
            self._told = (told, self._wall(), self._boot())

    def now(self) -> float:
        """The provider's time now; this device's wall clock before any answer told it."""
        if self._told is None:
            return self._wall()
        told, wall, boot = self._told
        return told + max(self._wall() - wall, self._boot() - boot, 0.0)

    @property
    def offset(self) -> float | None:
        """The provider's clock less this device's wall clock; None before any answer."""
        return None if self._told is None else self.now() - self._wall()
