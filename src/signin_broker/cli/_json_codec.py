"""JSON as the json module reads and writes it, for the one-shot commands: the one door to `_json`.

json's Python layer imports re and enum, about 7 ms of a one-shot process; its C
accelerator, CPython's private `_json`, needs neither. This module is the only one that
touches `_json`, as CPython's json package keeps it behind its own modules: it makes the
scanner and the encoder as json.JSONDecoder() and json.dumps(separators=(",", ":"))
make them, and tries them once on a known text (PROBE). Where `_json` is missing, or its
private API changed (another implementation, a newer CPython), the json module does the
work instead: the same answers, a few milliseconds later (ACCELERATED says which).
tests/unit/test_json_codec.py holds both ways to json's answers, and runs this one on
the newest CPython (pre-release) it finds.
"""

from __future__ import annotations

from ..json_depth import within_depth

TYPE_CHECKING = False  # not typing's: it would cost the one-shot about 5 ms
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, NoReturn

    Scan = Callable[[str, int], tuple[Any, int]]
    Encode = Callable[[object, int], Iterable[str]]

JSON_WHITESPACE = " \t\n\r"
# A text and the value it holds, on which the C codec is tried both ways before any use.
PROBE = '{"a":[1,-2.5e+30,true,false,null,"\\u00e9\\n\\"x"],"":{}}'
PROBE_VALUE = {"a": [1, -2.5e30, True, False, None, '\u00e9\n"x'], "": {}}


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


def _c_codec() -> tuple[Scan, Encode] | tuple[None, None]:
    """The C scanner and encoder, once they read and write PROBE as json does; else Nones."""
    try:
        from _json import encode_basestring_ascii, make_encoder, make_scanner

        scan: Scan = make_scanner(_Reading())  # type: ignore[arg-type]  # json passes a decoder
        # As json.dumps makes it: no cycle check (the values are trees), ASCII strings,
        # compact separators, keys in their order, no key skipped, no NaN.
        encode: Encode = make_encoder(
            None, _not_serializable, encode_basestring_ascii, None, ":", ",", False, False, False
        )
        works = scan(PROBE, 0) == (PROBE_VALUE, len(PROBE))
        works = works and "".join(encode(PROBE_VALUE, 0)) == PROBE
    except Exception:  # a private API: whatever it does now that it did not, json does instead
        return None, None
    return (scan, encode) if works else (None, None)


_scan, _encode = _c_codec()
ACCELERATED = _scan is not None  # False: the json module reads and writes


def loads(text: str | bytes) -> Any:
    """One JSON value, as json.loads reads it; ValueError when the text is not exactly one.

    A text nested deeper than json_depth reads is a ValueError too, before any parser
    sees it; NaN and Infinity (json's extension) are not JSON here.
    """
    if isinstance(text, bytes):
        text = text.decode()
    text = text.strip(JSON_WHITESPACE)
    if _scan is None:
        return _public_loads(text)
    bounded = within_depth(text)
    try:
        value, end = _scan(bounded, 0)
    except StopIteration:
        raise ValueError("expecting a JSON value") from None
    except SystemError:
        # The C scanner names what is wrong through json.decoder's JSONDecodeError, and
        # (before 3.12) only when json is loaded already; else it fails without an
        # exception. json says where (a bad KUBERNETES_EXEC_INFO, say).
        return _public_loads(text)
    if end != len(bounded):
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


def dumps(value: object) -> str:
    """The value as compact ASCII JSON, as json.dumps(value, separators=(",", ":")) writes it."""
    if _encode is None:
        import json

        return json.dumps(
            value,
            separators=(",", ":"),
            allow_nan=False,
            check_circular=False,
            default=_not_serializable,
        )
    return "".join(_encode(value, 0))


def _public_loads(text: str) -> Any:
    """The json module's reading: the same answers, with json's Python layer loaded."""
    import json

    return json.loads(within_depth(text), parse_constant=_no_constant)
