"""The one-shot's own reading of `signin-broker token ...` against argparse's.

The one-shot's reader (cli/_flags.py) spares it argparse; it may leave any line to
argparse, but a line it reads must come out exactly as argparse reads it. Both are made
from one declaration of the flags.
"""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from signin_broker.cli._flags import TOKEN_LINE, read_token_line
from signin_broker.cli.table import parse

COMMON_LINES = [
    ["token"],
    ["token", "--format", "header"],
    ["--socket", "/run/b.sock", "token", "--format=env", "--env-name", "GH_TOKEN"],
    ["token", "--scope", "read", "--scope=write", "--min-ttl", "300", "--account", "user:1001"],
    ["token", "--audience", "https://api.example", "--json", "--timeout", "2.5"],
    ["--timeout", "1", "token", "--format", "exec-credential", "--id-token"],
    ["--socket", "/a", "token", "--socket", "/b"],
    ["token", "--account="],
    ["token", "--acr-values", "urn:rig:mfa urn:rig:hwk", "--max-age", "300", "--json"],
]


def argparse_reading(argv: list[str]) -> dict[str, object] | None:
    """What argparse makes of the line, or None where it refuses it."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            parsed = vars(parse(argv))
        except SystemExit:
            return None
    return parsed


@pytest.mark.parametrize("argv", COMMON_LINES, ids=" ".join)
def test_the_lines_scripts_use_are_read_without_argparse_as_argparse_reads_them(
    argv: list[str],
) -> None:
    one_shot = read_token_line(argv)
    assert one_shot is not None
    assert vars(one_shot) == argparse_reading(argv)


VALUES = ["", "x", "read", "/s.sock", "5", "-5", " 7", "1_0", "2.5", "nan", "json", "env",
          "bogus", "token", "--", "-h", "user:1001"]  # fmt: skip
NAMES = [*TOKEN_LINE, "--acc", "--form", "--help", "-h", "--version", "--refused", "status"]
WORDS = st.one_of(
    st.sampled_from(["token", "token", "--", "-", *NAMES, *VALUES]),
    st.builds(
        lambda name, value: f"{name}={value}", st.sampled_from(NAMES), st.sampled_from(VALUES)
    ),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=7))
@example(["token", "--socket=--"])  # argparse drops the "--"
def test_a_line_the_one_shot_reads_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    one_shot = read_token_line(argv)
    if one_shot is not None:
        assert vars(one_shot) == argparse_reading(argv)


def test_help_abbreviations_and_bad_values_are_left_to_argparse() -> None:
    for argv in (
        ["token", "--help"],
        ["token", "--acc", "user:1"],
        ["token", "--min-ttl", "soon"],
        ["token", "--min-ttl", "-5"],  # argparse takes it; the one-shot's reader leaves it
        ["token", "--format", "yaml"],
        ["token", "--json=yes"],
        ["token", "--url=--"],
        ["token", "extra"],
        ["--json", "token"],
        ["--socket", "/s"],
        [],
    ):
        assert read_token_line(argv) is None, argv
