"""JSON-lines logging on stderr, one record a line, with the contract's structured fields.

Fields are passed through `extra=` (for example `flow`, `step`, `error_code`) and come
out as top-level keys beside `ts`, `severity`, `logger` and `msg`. Severity names
follow the contract's spelling (`warn`, not `warning`). Never pass a token, code or
secret in a message or a field.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

_SEVERITY = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warn",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonLinesFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record and its `extra=` fields."""
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "severity": _SEVERITY.get(record.levelno, record.levelname.lower()),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def configure(level: str) -> None:
    """Send every record of the process to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLinesFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.captureWarnings(True)
    # A line per request (with URLs), or per HTTP/2 header a caller sends, even at debug.
    for chatty in ("httpx2", "httpcore2", "uvicorn", "hpack", "h2", "grpclib"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, root.level))


class Throttled:
    """A warning that others decide how often to cause: one record per interval, with a count.

    Refused connections are the example: another user choosing to connect ten thousand
    times must not choose ten thousand log lines. The first occurrence is logged at
    once; later ones are counted into the next record, at most one per `seconds`.
    """

    def __init__(
        self,
        logger: logging.Logger,
        message: str,
        seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._message = message
        self._seconds = seconds
        self._clock = clock
        self._count = 0
        self._next = 0.0

    def warn(self, **extra: object) -> None:
        """Count one occurrence; log it (with how many came since the last record) if due."""
        self._count += 1
        now = self._clock()
        if now < self._next:
            return
        self._logger.warning(self._message, extra={**extra, "occurrences": self._count})
        self._count = 0
        self._next = now + self._seconds
