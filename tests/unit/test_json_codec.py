"""JSON as the broker reads it: the one-shot's codec (cli/_json_codec.py, CPython's C codec
alone, or the json module where that is missing or changed) against the json module, on
this interpreter and on the newest CPython found here; and the depth bound every reader
applies first (json_depth)."""

from __future__ import annotations

import ast
import contextlib
import json
import json.decoder
import json.scanner
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import signin_broker
from signin_broker.cli._json_codec import ACCELERATED, dumps, loads
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
        "from signin_broker.cli._json_codec import loads\n"
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


# -- the C codec behind its one door, on other CPythons, and without it -------------------

PROBE = Path(__file__).parents[1] / "support" / "json_codec_probe.py"
PRE_RELEASE_ENV = "SIGNIN_BROKER_PRE_RELEASE_PYTHON"
# A CPython's version as pyenv's and uv's folders name it: 3.16.0a2, cpython-3.14.1-linux-...
VERSION_IN_NAME = re.compile(r"(?:cpython-)?(\d+)\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?(?:$|[-+])")
LEVELS = {"a": 0, "b": 1, "rc": 2, None: 3}


def probed(python: str, mode: str = "as-is") -> dict[str, Any]:
    """What json_codec_probe.py finds of the codec on that interpreter, the package on its path."""
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(Path(signin_broker.__file__).parents[1]),
        "PYTHONDONTWRITEBYTECODE": "1",  # another CPython's caches stay out of the tree
    }
    done = subprocess.run(
        [python, str(PROBE), mode], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def cpythons_here() -> list[tuple[tuple[int, ...], str]]:
    """The CPythons installed beside the tests' own (pyenv's, uv's), each with its version."""
    home = Path.home()
    roots = [
        Path(os.environ.get("PYENV_ROOT", home / ".pyenv")) / "versions",
        Path(os.environ.get("UV_PYTHON_INSTALL_DIR", home / ".local/share/uv/python")),
    ]
    found = []
    for folder in (folder for root in roots if root.is_dir() for folder in root.iterdir()):
        named = VERSION_IN_NAME.match(folder.name)
        python = folder / "bin" / "python3"
        if named and python.exists() and "freethreaded" not in folder.name:
            major, minor, micro, level, serial = named.groups()
            version = (int(major), int(minor), int(micro), LEVELS[level], int(serial or 0))
            found.append((version, str(python)))
    return sorted(found)


def newest(pre_release: bool) -> str:
    """The newest CPython pre-release (or release) here; skips the test where there is none."""
    if pre_release and os.environ.get(PRE_RELEASE_ENV):
        return os.environ[PRE_RELEASE_ENV]
    final = LEVELS[None]
    kind = [(v, python) for v, python in cpythons_here() if (v[3] < final) is pre_release]
    if pre_release and not kind:
        pytest.skip(
            "no CPython pre-release is installed here (pyenv's, uv's): `uv python list` names"
            " the newest, `uv python install` fetches it from python-build-standalone; or set"
            f" {PRE_RELEASE_ENV} to one"
        )
    if not kind or kind[-1][0][:3] <= sys.version_info[:3]:
        pytest.skip("no CPython here is newer than the tests' own, on which the others run")
    return kind[-1][1]


@pytest.mark.parametrize("pre_release", [True, False], ids=["pre-release", "release"])
def test_the_c_codec_is_used_and_answers_as_json_on_the_newest_cpython(pre_release: bool) -> None:
    """The guard of CPython's private API: a change of `_json` shows here first.

    It fails when the codec fell back to the json module there: right still, but the
    one-shot is 7 ms slower until _json_codec.py follows the change.
    """
    found = probed(newest(pre_release))
    assert found["mismatches"] == [], found["version"]
    assert found["accelerated"], f"CPython {found['version']} changed _json: see _json_codec.py"
    assert found["json_not_loaded"], found["version"]


def test_the_c_codec_is_used_on_this_cpython() -> None:
    assert ACCELERATED


@pytest.mark.parametrize("mode", ["without", "changed"])
def test_without_the_private_api_or_with_a_changed_one_json_answers(mode: str) -> None:
    """`_json` taken away, or one whose functions take other arguments: the json module reads."""
    found = probed(sys.executable, mode)
    assert not found["accelerated"]
    assert found["mismatches"] == []


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
    """Whether the call reads JSON: json's, protobuf's, httpx's response.json(), the C scanner."""
    called = call.func
    if isinstance(called, ast.Name):
        return called.id == "_scan"  # cli/_json_codec.py's C scanner
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
