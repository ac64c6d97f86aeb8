"""One bound on how deep the JSON the broker reads may nest, checked before any parser sees it.

CPython's json reader recurses once per level: a text of 50,000 `[` (50 KB, well within
any size limit here) raises RecursionError, which no reader expects, and a value nested a
few hundred levels deep overflows the next recursive walk of it (protobuf's JSON reader,
json.dumps of it into a state file read back at the next start). Every JSON text the
daemon, the native host and the CLI read from outside (state files, requests on the
socket, native messaging frames, the provider's answers, the daemon's answers) passes
`within_depth` first: no document of the broker's nests anywhere near MAX_DEPTH, and one
that does is refused as a ValueError, as any text that is not JSON is.

Nothing is imported here: the one-shot `signin-broker token` (cli/_json_codec.py) checks its
answer without json's Python layer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the one-shot does without it (see signin_broker/__init__)
if TYPE_CHECKING:
    from typing import TypeVar

    Text = TypeVar("Text", str, bytes, bytearray)

MAX_DEPTH = 64
_OPENING = frozenset(b"[{")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


class TooDeep(ValueError):
    """A JSON text nests deeper than MAX_DEPTH levels."""


def within_depth(text: Text, limit: int = MAX_DEPTH) -> Text:
    """The text itself, if as JSON it nests at most `limit` arrays and objects deep; else TooDeep.

    Exact for JSON text. For text that is not JSON, a parser stops where it stops being
    JSON, and up to there nests no deeper than counted here: it never recurses past the limit.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") > limit:  # else too few brackets to nest that deep
        _check_depth(bytes(data), limit)
    return text


def _check_depth(data: bytes, limit: int) -> None:
    if b"\0" in data:  # UTF-16 or UTF-32, whose escapes are not the bytes below; or not JSON
        raise TooDeep("the text is not UTF-8 JSON (it holds a NUL)")
    # Without escaped backslashes, then escaped quotes, the quotes left open and close
    # strings: every other piece between them is outside strings.
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in _OPENING else -1
        if depth > limit:
            raise TooDeep(f"the JSON nests deeper than {limit} levels")
