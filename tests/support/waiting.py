"""Bounded waits for a state that lasts, saying what they waited for when they give up."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    condition: Callable[[], T], what: str, timeout: float = 60.0, every: float = 0.2
) -> T:
    """The first truthy value of condition(), polled every `every` seconds; AssertionError
    naming `what` after timeout."""
    deadline = time.monotonic() + timeout
    while not (found := condition()):
        assert time.monotonic() < deadline, f"never: {what} (within {timeout:g} s)"
        time.sleep(every)
    return found
