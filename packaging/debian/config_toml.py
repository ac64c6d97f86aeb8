"""Prints /etc/xdg/signin-broker/config.toml for the Debian package: every line commented.

Drawn from the daemon's table of settings, so the file names every setting with its
default and its help, and a test of the package sees no setting take effect from it.
The defaults that depend on the person (folders under their home, their runtime
folder) are shown as a person reads them, never as the build machine's paths;
scripts/manpages.py shows the same ones in signin-broker.toml(5).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from docs_hooks import as_read, documented_environment

from signin_broker.daemon.options import OPTIONS, PROVIDER_KEYS, env_name

HEADER = """\
# signin-broker: settings for every user of this machine (the package's conffile).
#
# Every line is a comment: the daemon's defaults hold until you set a key here. Each
# user's own ~/.config/signin-broker/config.toml, their SIGNIN_BROKER_* variables and
# the daemon's flags win over this file, key by key; files in config.d/ next to it are
# read after it, in name order. Keep it writable by root alone: the daemon refuses a
# managed file that another user could change (it could send sign-ins elsewhere).
# `signin-broker status` says which file set each provider setting. A running daemon
# reads it when it starts again: `systemctl --user restart signin-broker.service`.
# Every setting, its default, flag and variable: `man signin-broker.toml`.
"""


def shown_defaults() -> dict[str, str]:
    """Each setting's default as a TOML value, written as a person reads it."""
    shown = {}
    with documented_environment() as made_up:
        for option in OPTIONS:
            default = option.default()
            if isinstance(default, dict):
                shown[option.name] = "{}"
            elif isinstance(default, str) and default.isdigit():
                shown[option.name] = default
            else:
                shown[option.name] = f'"{as_read(default, made_up)}"'
    return shown


def template() -> str:
    parts = [HEADER]
    for option, default in zip(OPTIONS, shown_defaults().values(), strict=True):
        lines = textwrap.wrap(option.help + ".", width=84)
        if option.name in PROVIDER_KEYS:
            lines.append("Also in a [providers.<alias>] table, for another provider.")
        lines.append(f"Or the flag --{option.name.replace('_', '-')}, or ${env_name(option.name)}.")
        parts.append("\n".join(f"# {line}" for line in lines) + f"\n#{option.name} = {default}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(template(), end="")
