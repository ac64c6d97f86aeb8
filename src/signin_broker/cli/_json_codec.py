"""JSON for the one-shot commands through CPython's own C codec, without json's Python layer.

`import json` brings in `re` and `enum`: about 7 ms of a one-shot whose whole budget
beyond Python's start is 13. The C scanner and string encoder that json itself runs
(the `_json` module) do the same work without them. Answers are read strictly, as
json.loads reads them (no NaN or Infinity either, which JSON does not have).
"""

from __future__ import annotations

from _json import encode_basestring_ascii, make_encoder, make_scanner

TYPE_CHECKING = False  # not typing's: see signin_broker/__init__.py
if TYPE_CHECKING:
    from typing import Any, NoReturn

JSON_WHITESPACE = " \t\n\r"


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _not_serializable(value: object) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class _Reading:
    """The settings _json's scanner reads, as json.JSONDecoder() has them by default."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    array_hook = None  # read from Python 3.15 on
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_no_constant)


_scan = make_scanner(_Reading())  # type: ignore[arg-type]  # the stub wants its own type; json passes a decoder too
# As json.dumps makes it: no cycle check (the values are trees), ASCII strings, compact
# separators, keys in their order, no key skipped, no NaN.
_encode = make_encoder(
    None, _not_serializable, encode_basestring_ascii, None, ":", ",", False, False, False
)


def loads(text: str | bytes) -> Any:
    """One JSON value, as json.loads reads it; ValueError when the text is not exactly one."""
    if isinstance(text, bytes):
        text = text.decode()
    text = text.strip(JSON_WHITESPACE)
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("expecting a JSON value") from None
    if end != len(text):
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


def dumps(value: object) -> str:
    """The value as compact ASCII JSON, as json.dumps(value, separators=(",", ":")) writes it."""
    return "".join(_encode(value, 0))
