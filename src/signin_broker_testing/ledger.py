"""A record of every secret the stub providers of this process issued or were shown.

Access, refresh and ID tokens, authorization and device codes, and the PKCE code
verifiers that token requests carry are noted here as they pass, so that a test run
can check at its end that none of them reached a log line of any daemon it ran.
"""

from __future__ import annotations

import threading
from typing import ClassVar


class SecretLedger:
    """Class-level, so it spans every stub of the process; safe from any thread."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _secrets: ClassVar[set[str]] = set()

    @classmethod
    def note(cls, *values: object) -> None:
        """Remember these secrets; anything but a non-empty string is skipped."""
        with cls._lock:
            cls._secrets.update(value for value in values if isinstance(value, str) and value)

    @classmethod
    def secrets(cls) -> frozenset[str]:
        """Every secret noted so far."""
        with cls._lock:
            return frozenset(cls._secrets)
