"""What the fuzz tests share: Hypothesis settings that repeat, and a scan for log trouble."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

# Bounded and derandomized: a run is repeatable and takes the same time each time.
FUZZ = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],  # no slow 'explain' pass
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # the daemon is the module's, on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


def troubled_lines(lines: Sequence[str]) -> list[str]:
    """Log lines of severity error and above, or of a traceback above debug.

    A library may note at debug what it refused, with its traceback (grpclib does, for
    a connection that is not HTTP/2); at debug a log is verbose by request.
    """
    trouble = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            trouble.append(line[:1500])  # not a record: a bare traceback on stderr
            continue
        severity = record.get("severity")
        traceback = "exception" in record or "Traceback" in line
        if severity in ("error", "critical") or (traceback and severity != "debug"):
            trouble.append(line[:1500])
    return trouble


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight says (one_of gives each the same)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(table).flatmap(lambda strategy: strategy)
