"""JSON as the broker reads it: the one-shot's codec (cli/quick.py, CPython's C codec alone)
against the json module, and the depth bound every reader applies first (json_depth)."""

from __future__ import annotations

import ast
import contextlib
import json
import json.decoder
import json.scanner
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import signin_broker
from signin_broker.cli.quick import dumps, loads
from signin_broker.json_depth import MAX_DEPTH, TooDeep, within_depth

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
        "for text in ('{bad', '[1,', 'nul', '{\"a\": }', '[' * 50000 + ']' * 50000):\n"
        "    try:\n"
        "        loads(text)\n"
        "    except ValueError:\n"
        "        continue\n"
        "    raise AssertionError(text)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


# -- the depth bound (json_depth) ------------------------------------------------------------

TRICKY = st.text(alphabet=st.sampled_from('[]{}"\\ a\u00e9\n'), max_size=6)
NESTED = st.recursive(
    st.none() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=30,
)


def nesting(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(nesting, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(nesting, value.values()), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(NESTED, st.integers(min_value=0, max_value=6))
def test_a_json_text_passes_exactly_when_it_nests_no_deeper_than_the_limit(
    value: object, limit: int
) -> None:
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=1)):
        for given_as in (text, text.encode(), bytearray(text.encode())):
            if nesting(value) <= limit:
                assert within_depth(given_as, limit) is given_as
            else:
                with pytest.raises(TooDeep, match=f"nests deeper than {limit} levels"):
                    within_depth(given_as, limit)


class MeasuringDecoder(json.JSONDecoder):
    """json's own pure-Python reader, counting how deep it nests before it stops."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = self.deepest = 0
        self.parse_object = self._nested(json.decoder.JSONObject)
        self.parse_array = self._nested(json.decoder.JSONArray)
        self.scan_once = json.scanner.py_make_scanner(self)

    def _nested(self, parse: Any) -> Any:
        def parse_nested(*args: Any) -> Any:
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)
            try:
                return parse(*args)
            finally:
                self.depth -= 1

        return parse_nested


def garbage() -> st.SearchStrategy[str]:
    pieces = st.sampled_from(["[", "]", "{", "}", "[", "{", '"', '\\', '\\"', '"\\\\"', ":",
                              ",", "1", '"a"', " ", "\x00"])  # fmt: skip
    return st.lists(pieces, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(garbage(), st.integers(min_value=0, max_value=3))
def test_a_parser_never_nests_deeper_than_a_text_that_passed_says(text: str, limit: int) -> None:
    """Text that is not JSON: json stops where it stops being JSON, never past the bound."""
    try:
        within_depth(text, limit)
    except TooDeep:
        return
    reader = MeasuringDecoder()
    with contextlib.suppress(ValueError):
        reader.decode(text)
    assert reader.deepest <= limit


def test_the_bound_is_far_above_any_document_of_the_broker_and_far_below_recursion() -> None:
    assert 16 <= MAX_DEPTH <= sys.getrecursionlimit() // 10
    assert within_depth("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(TooDeep):
        within_depth(b"[" * 50_000)
    with pytest.raises(TooDeep, match="not UTF-8 JSON"):  # UTF-16: its escapes are not bytes
        within_depth(("[" * 70).encode("utf-16-le"))


# What reads JSON, and how each reader is named in the source.
READERS = {("json", "loads"), ("json", "load"), ("json_format", "Parse")}
# Readers that need no bound: what the module wrote itself a line before, an example app's.
UNBOUNDED = {"daemon/doctor.py", "examples/sync_agent.py"}


def reads_json(call: ast.Call) -> bool:
    """Whether the call reads JSON: json's, protobuf's, httpx's response.json(), quick's scanner."""
    called = call.func
    if isinstance(called, ast.Name):
        return called.id == "_scan"  # cli/quick.py's C scanner
    if not isinstance(called, ast.Attribute):
        return False
    owner = called.value.id if isinstance(called.value, ast.Name) else ""
    return called.attr == "json" or (owner, called.attr) in READERS


def reads_of_json(tree: ast.AST) -> list[tuple[ast.Call, ast.AST | None]]:
    """Every call that reads JSON, and the function it is in."""
    found: list[tuple[ast.Call, ast.AST | None]] = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and reads_json(child):
                found.append((child, function))
            functions = ast.FunctionDef | ast.AsyncFunctionDef
            visit(child, child if isinstance(child, functions) else function)

    visit(tree, None)
    return found


def bounded(argument: ast.expr | None, function: ast.AST | None) -> bool:
    """Whether the text read is within_depth(...), or a name given its value in the function."""

    def checked(node: ast.AST | None) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "within_depth"
        )

    if checked(argument):
        return True
    if not isinstance(argument, ast.Name) or function is None:
        return False
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == argument.id for t in node.targets)
        and checked(node.value)
        for node in ast.walk(function)
    )


def test_every_json_the_broker_reads_passes_the_depth_bound_first() -> None:
    package = Path(signin_broker.__file__).parent
    reads, unbounded = 0, []
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix()
        if name in UNBOUNDED or name.startswith("v1/"):
            continue
        for call, function in reads_of_json(ast.parse(path.read_text())):
            reads += 1
            if not bounded(call.args[0] if call.args else None, function):
                unbounded.append(f"{name}:{call.lineno}")
    assert reads >= 18  # state files, the socket, the host, the provider, the CLI
    assert unbounded == [], "read without within_depth (json_depth.py) first"
