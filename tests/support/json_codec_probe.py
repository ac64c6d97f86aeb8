"""The CLI's JSON codec (cli/_json_codec.py) against the json module, in an interpreter of its own.

    python json_codec_probe.py as-is|without|changed

Standard library only: it runs on other CPythons than the tests' (a pre-release) with
just the package's folder on PYTHONPATH. `without` takes CPython's private `_json` away
while the codec loads, `changed` puts a `_json` in its place whose API is not the one
the codec knows (json itself, compared with, gets the real one). Prints one JSON object:
the version, whether the codec took the C path, whether writing loaded json, and every
answer that differs from json's.
"""

from __future__ import annotations

import sys
import types

STAND_IN_MODES = ("without", "changed")
VALUES = [None, True, 0, -1, 2**70, 1.5, -2.5e-30, "", "a\u00e9\u2603\U0001f600\n\"\\",
          [], {}, [1, [2, [3, {}]]], {"b": 1, "a": [None, "x"]}, {"": {"": ""}}]  # fmt: skip
TEXTS = ['{"a": [1, 2.5, "\\u00e9", null]}', " [true , false] ", "0", "-0.5e3", '"\\ud83d"',
         "", "{bad", "[1,", "nul", '{"a": }', "[1] [2]", "NaN", "[Infinity]", "'a'",
         "[" * 65 + "]" * 65, "[" * 64 + "]" * 64, '"\\x"', "\u00a0[]"]  # fmt: skip


def changed_json() -> types.ModuleType:
    """A `_json` whose functions take other arguments, as a new CPython's may."""
    stand_in = types.ModuleType("_json")

    def make_scanner(context: object, memo_limit: int) -> None:
        raise AssertionError("never reached: one argument is missing")

    def make_encoder(*arguments: object) -> None:
        raise TypeError(f"make_encoder() takes 10 arguments ({len(arguments)} given)")

    stand_in.make_scanner = make_scanner  # type: ignore[attr-defined]
    stand_in.make_encoder = make_encoder  # type: ignore[attr-defined]
    stand_in.encode_basestring_ascii = str  # type: ignore[attr-defined]
    return stand_in


def outcome(call: object, argument: object) -> object:
    """The answer of call(argument), or the kind of its refusal."""
    try:
        return ["value", call(argument)]  # type: ignore[operator]
    except ValueError:
        return ["ValueError"]
    except TypeError:
        return ["TypeError"]


def main(mode: str) -> None:
    if mode == "without":
        sys.modules["_json"] = None  # type: ignore[assignment]  # import _json fails
    elif mode == "changed":
        sys.modules["_json"] = changed_json()
    from signin_broker.cli import _json_codec as codec
    from signin_broker.json_depth import within_depth

    if mode in STAND_IN_MODES:
        del sys.modules["_json"]  # json itself, compared with, has the real one

    clean = [codec.dumps(value) for value in VALUES] and "json" not in sys.modules
    import json

    def json_loads(text: str) -> object:
        def refused(name: str) -> object:
            raise ValueError(name)

        return json.loads(within_depth(text), parse_constant=refused)

    mismatches = []
    for value in [*VALUES, float("nan"), object()]:
        expected = outcome(lambda v: json.dumps(v, separators=(",", ":"), allow_nan=False), value)
        if outcome(codec.dumps, value) != expected:
            mismatches.append(f"dumps({value!r})")
    for text in [*TEXTS, *map(json.dumps, VALUES)]:
        for given in (text, text.encode()):
            if outcome(codec.loads, given) != outcome(json_loads, text):
                mismatches.append(f"loads({given!r})")
    print(
        json.dumps(
            {
                "version": list(sys.version_info),
                "accelerated": codec.ACCELERATED,
                "json_not_loaded": clean,
                "mismatches": mismatches,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
