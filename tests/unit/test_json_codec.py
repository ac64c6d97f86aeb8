"""The one-shot's JSON (cli/quick.py, CPython's C codec alone) against the json module."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signin_broker.cli.quick import dumps, loads

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_values_are_written_and_read_as_json_writes_and_reads_them(value: object) -> None:
    written = dumps(value)
    assert written == json.dumps(value, separators=(",", ":"))
    assert loads(written) == json.loads(written)
    assert loads(f" \n{written}\t".encode()) == json.loads(written)


def json_text_or_garbage() -> st.SearchStrategy[str]:
    pieces = st.sampled_from(["{", "}", "[", "]", ",", ":", '"a"', '"\\u00e9"', '"\\x"',
                              "1", "-0.5e3", "true", "nul", "null", " ", "\n", "NaN",
                              "'a'"])  # fmt: skip
    return st.lists(pieces, max_size=10).map("".join) | st.text(max_size=12)


@settings(max_examples=500, deadline=None)
@given(json_text_or_garbage())
def test_text_is_refused_where_json_refuses_it(text: str) -> None:
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            loads(text)
        return
    if "NaN" in text or "Infinity" in text:  # json's extension: not JSON, refused here
        with pytest.raises(ValueError):
            loads(text)
        return
    assert loads(text) == expected


def test_what_json_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError):
        dumps({"a": math.nan})
    with pytest.raises(TypeError):
        dumps({"a": object()})
    with pytest.raises(ValueError, match="extra data"):
        loads('{"a": 1} {"b": 2}')


def test_text_that_is_not_json_is_a_value_error_before_json_is_loaded() -> None:
    """The one-shot never loads json: a bad KUBERNETES_EXEC_INFO was a SystemError there."""
    probe = (
        "import sys\n"
        "from signin_broker.cli.quick import loads\n"
        "assert 'json' not in sys.modules\n"
        "for text in ('{bad', '[1,', 'nul', '{\"a\": }'):\n"
        "    try:\n"
        "        loads(text)\n"
        "    except ValueError:\n"
        "        continue\n"
        "    raise AssertionError(text)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
