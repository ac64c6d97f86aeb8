"""The manual pages (man/, made by scripts/manpages.py): the sections a reader looks for,
every setting, variable, command and option, and nothing broken where man fills a line."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from signin_broker.cli.table import COMMANDS, full_parser
from signin_broker.daemon.options import OPTIONS, env_name
from support.real import unavailable

MAN = Path(__file__).parents[2] / "man"
PAGES = ("signin-broker.1", "signin-brokerd.1", "signin-broker.toml.5")
SECTIONS = {
    "signin-broker.1": (
        "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "ENVIRONMENT", "FILES",
        "EXIT STATUS", "EXAMPLES", "SEE ALSO",
    ),
    "signin-brokerd.1": (
        "NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "ENVIRONMENT", "FILES", "EXIT STATUS",
        "EXAMPLES", "SEE ALSO",
    ),
    "signin-broker.toml.5": (
        "NAME", "SYNOPSIS", "DESCRIPTION", "SETTINGS", "EXAMPLES", "FILES", "SEE ALSO",
    ),
}  # fmt: skip


def roff(words: str) -> str:
    return words.replace("-", "\\-")


def source(page: str) -> str:
    return (MAN / page).read_text()


def sections(page: str) -> dict[str, str]:
    """Each section's roff, by its heading."""
    parts = re.split(r"^\.SH (.+)$", source(page), flags=re.MULTILINE)
    return {
        heading.strip('"'): body for heading, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def rendered(page: str, width: int) -> str:
    """The page as man shows it, `width` columns wide; groff warns of nothing at 80."""
    if shutil.which("groff") is None:
        unavailable("groff is needed to render the manual pages (Debian package groff-base)")
    done = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", *([] if width >= 80 else ["-Wbreak"]),
         f"-rLL={width}n", str(MAN / page)],
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr
    return re.sub(r".\x08", "", done.stdout)  # no overstrike (bold, underline)


@pytest.mark.parametrize("page", PAGES)
def test_each_page_has_the_sections_of_ssh_agent_and_git_credential(page: str) -> None:
    assert tuple(sections(page)) == SECTIONS[page]
    name_line = sections(page)["NAME"].strip()
    description = sections(page)["DESCRIPTION"]
    assert name_line.split(" \\- ")[1] not in description  # says what it is, not NAME again
    assert len(description) > 600


def test_the_daemon_pages_list_every_setting_its_flag_and_variable() -> None:
    daemon, config = source("signin-brokerd.1"), source("signin-broker.toml.5")
    options = sections("signin-brokerd.1")["OPTIONS"]
    environment = sections("signin-brokerd.1")["ENVIRONMENT"]
    settings = sections("signin-broker.toml.5")["SETTINGS"]
    for option in OPTIONS:
        flag = roff("--" + option.name.replace("_", "-"))
        assert f"\\fB{flag}\\fR" in options, option.name
        assert f"\\fB{env_name(option.name)}\\fR" in environment, option.name
        entry = re.search(rf"^\\fB{option.name}\\fR = (.+)\n(.+)$", settings, re.MULTILINE)
        assert entry, f"{option.name} is not in signin-broker.toml(5)'s SETTINGS"
        assert flag in entry[2] and env_name(option.name) in entry[2], entry[0]
    for page in (daemon, config):
        assert env_name("config") in page


def test_the_defaults_are_a_persons_never_the_build_machines() -> None:
    settings = sections("signin-broker.toml.5")["SETTINGS"]
    assert '\\fBstate_dir\\fR = \\fI"~/.local/state/signin\\-broker"\\fR' in settings
    assert "$XDG_RUNTIME_DIR/signin\\-broker/broker.sock" in settings
    assert str(Path.home()) not in settings and "/tmp/" not in settings


def commands_and_options() -> list[tuple[str, argparse.ArgumentParser]]:
    """Each command and sub-command with its parser ("accounts use", ...)."""
    found = []

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append((f"{prefix} {name}".strip(), sub))
                    walk(f"{prefix} {name}", sub)

    walk("", full_parser())
    return found


def test_the_client_page_lists_every_command_option_and_variable() -> None:
    commands = sections("signin-broker.1")["COMMANDS"]
    every = commands_and_options()
    assert {name for name, _ in every if " " not in name} == set(COMMANDS)
    for name, parser in every:
        heading = re.search(rf"^\.SS {re.escape(roff(name))}\n(.*?)(?=^\.SS |\Z)", commands,
                            re.MULTILINE | re.DOTALL)  # fmt: skip
        assert heading, f"`{name}` is not in signin-broker(1)"
        for action in parser._actions:
            if action.dest in ("help", "json", "socket", "timeout"):
                continue
            for flag in action.option_strings:
                assert f"\\fB{roff(flag)}\\fR" in heading[1], f"{name} {flag}"
    environment = sections("signin-broker.1")["ENVIRONMENT"]
    for variable in (
        "SIGNIN_BROKER_SOCKET",
        "SIGNIN_BROKER_BROWSER",
        "SIGNIN_BROKER_TOKEN",
        "SIGNIN_BROKER_TOKEN_TYPE",
        "SIGNIN_BROKER_TRY_ISSUER",
        "XDG_RUNTIME_DIR",
    ):
        assert f"\\fB{variable}\\fR" in environment, variable  # fmt: skip


@pytest.mark.parametrize("page", PAGES)
def test_man_fills_the_lines_and_never_breaks_a_path(page: str) -> None:
    for line in source(page).splitlines():
        if not line.startswith((".", "'")):  # words: every dash one man cannot break at
            assert "-" not in line.replace("\\-", ""), line
    rendered(page, 80)
    narrow = " ".join(rendered(page, 46).split())
    for path in ("signin-broker/config.d/*.toml", "$XDG_RUNTIME_DIR/signin-broker/broker.sock"):
        if path.replace("-", "\\-") in source(page):
            assert path in narrow, f"{path} broken in {page} at 46 columns"
    assert "signin- broker" not in narrow
