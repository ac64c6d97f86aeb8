"""The documentation: the generated reference names everything the code has; the README's links.

The reference pages are drawn from the code at build time (scripts/docs_hooks.py);
these tests enumerate settings, RPCs, messages, commands and statuses on their own,
from the code, and fail on any the generated pages leave out.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from types import ModuleType

import pytest

from support import site

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def hooks() -> ModuleType:
    return site.hooks()


def built(hooks: ModuleType, page: str) -> str:
    """A page of the site as the hook fills it in at build time."""
    return hooks.fill((DOCS / page).read_text())


def test_every_setting_is_in_the_reference_with_flag_variable_key_and_default(
    hooks: ModuleType,
) -> None:
    from signin_broker.daemon.options import OPTIONS, env_name
    from signin_broker.daemon.settings import argument_parser

    page = built(hooks, "reference/settings.md")
    rows = {
        line.split("|")[1].strip(" `"): line for line in page.splitlines() if line.startswith("| `")
    }
    missing = [option.name for option in OPTIONS if option.name not in rows]
    assert not missing, f"settings missing from docs/reference/settings.md: {missing}"
    for option in OPTIONS:
        row = rows[option.name]
        assert f"`--{option.name.replace('_', '-')} " in row, row
        assert f"`{env_name(option.name)}`" in row, row
    flags = {s for a in argument_parser()._actions for s in a.option_strings if s.startswith("--")}
    assert not [f for f in flags - {"--help"} if f"`{f}" not in page], "a daemon flag is missing"


def test_the_settings_defaults_read_as_a_person_reads_them_not_as_the_build_machine(
    hooks: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "builder"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    page = built(hooks, "reference/settings.md")
    assert "`~/.local/state/signin-broker`" in page
    assert "`~/.config/signin-broker/apps.toml`" in page
    assert "`$XDG_RUNTIME_DIR/signin-broker/broker.sock`" in page
    assert str(tmp_path) not in page


def test_every_rpc_message_and_enum_is_in_the_reference(hooks: ModuleType) -> None:
    from signin_broker.v1 import broker_pb2

    page = built(hooks, "reference/api.md")
    file = broker_pb2.DESCRIPTOR
    missing = [
        f"RPC {method.name}"
        for service in file.services_by_name.values()
        for method in service.methods
        if f"| `{method.name}` |" not in page
    ]
    missing += [f"message {m}" for m in file.message_types_by_name if f"### {m}\n" not in page]
    missing += [f"enum {name}" for name in file.enum_types_by_name if f"### {name}\n" not in page]
    for message in file.message_types_by_name.values():
        missing += [
            f"field {message.name}.{field.name}"
            for field in message.fields
            if f"| `{field.name}` |" not in page
        ]
    assert not missing, f"missing from docs/reference/api.md: {missing}"


def _commands(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(f"{prefix} {name}")
                found += _commands(sub, f"{prefix} {name}")
    return found


def test_every_cli_command_and_option_is_in_the_reference(hooks: ModuleType) -> None:
    from signin_broker.cli.table import full_parser

    page = built(hooks, "reference/cli.md")
    commands = _commands(full_parser(), "signin-broker")
    assert len(commands) > 15
    missing = [command for command in commands if f"## `{command}`" not in page]
    assert not missing, f"commands missing from docs/reference/cli.md: {missing}"
    for action in full_parser()._actions:
        for option in action.option_strings:
            assert f"`{option}" in page or option in ("-h", "--help"), option


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    found = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [text for sub in action.choices.values() for text in _helps(sub)]
    return found


def test_every_variable_a_help_names_is_in_the_settings_reference(hooks: ModuleType) -> None:
    from signin_broker.cli.table import full_parser
    from signin_broker.daemon.settings import argument_parser

    named = {
        name
        for text in [*_helps(argument_parser()), *_helps(full_parser())]
        for name in re.findall(r"SIGNIN_BROKER_[A-Z_]*[A-Z]", text)
    }
    assert "SIGNIN_BROKER_CONFIG" in named
    page = built(hooks, "reference/settings.md")
    assert not [name for name in named if f"`{name}`" not in page]


def test_every_exit_status_and_refusal_is_in_the_reference(hooks: ModuleType) -> None:
    from grpclib.const import Status

    from signin_broker.cli import _failures
    from signin_broker.daemon.api import statuses

    page = built(hooks, "reference/statuses.md")
    exits = [name for name in dir(_failures) if name.startswith("EXIT_")]
    assert exits and all(f"| `{name}` |" in page for name in exits)
    assert all(f"| `{refusal.__name__}` |" in page for refusal in statuses._STATUS_OF)
    assert all(f"| `{status.name}` |" in page for status in Status)
    # Every exit status has its meaning written beside it, not only its name.
    assert set(exits) <= set(hooks.EXIT_MEANINGS)


def test_the_benchmark_chart_is_drawn_from_the_benchmarks_output(hooks: ModuleType) -> None:
    printed = (DOCS / "explanation" / "bench_api.txt").read_text()
    rows = hooks.benchmark_rows(printed)
    names = [name for name, _, _ in rows]
    assert "GetToken p50 latency (ms), 1 client" in names and len(rows) >= 8
    chart = built(hooks, "explanation/performance.md")
    assert chart.count("<rect ") == len(rows) and "<!-- chart:" not in chart


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_a_landing_page_whose_links_all_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    links = LINK.findall(readme)
    assert len(links) >= 10
    for link in links:
        assert not link.startswith(("http://", "https://")), f"a link outside the tree: {link}"
        path = (ROOT / link.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"README links to missing {link}"
    # The two set-up commands it names exist and run as it says.
    for script in ("scripts/demo", "scripts/check"):
        assert f"\n{script} " in readme and (ROOT / script).stat().st_mode & 0o111


TEST_NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def test_every_claim_of_the_threat_model_names_tests_that_exist() -> None:
    """Each row of a table with a "tested by" column names a test, and each test named exists."""
    page = (DOCS / "explanation" / "threat-model.md").read_text()
    rows, in_claims = [], False
    for line in page.splitlines():
        if not line.startswith("|"):
            in_claims = False
        elif "| tested by |" in line:
            in_claims = True
        elif in_claims and not line.startswith("|---"):
            rows.append(line)
    assert len(rows) >= 25
    assert not [row[:80] for row in rows if not TEST_NAMED.search(row)], "a claim names no test"
    defined: dict[str, set[str]] = {}
    missing = []
    for path, name in TEST_NAMED.findall(page):
        if path not in defined:
            source = (ROOT / path).read_text() if (ROOT / path).exists() else ""
            defined[path] = {
                node.name
                for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.FunctionDef)
            }
        if name not in defined[path]:
            missing.append(f"{path}::{name}")
    assert missing == [], "the threat model names tests that do not exist"
