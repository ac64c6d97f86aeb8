"""Prints /etc/xdg/signin-broker/config.toml for the Debian package: every line commented.

Drawn from the daemon's table of settings, so the file names every setting with its
default and its help, and a test of the package sees no setting take effect from it.
"""

from __future__ import annotations

import os
import textwrap

from signin_broker.daemon.options import OPTIONS, PROVIDER_KEYS, env_name

HEADER = """\
# signin-broker: settings for every user of this machine (the package's conffile).
#
# Every line is a comment: the daemon's defaults hold until you set a key here. Each
# user's own ~/.config/signin-broker/config.toml, their SIGNIN_BROKER_* variables and
# the daemon's flags win over this file, key by key; files in config.d/ next to it are
# read after it, in name order. Keep it writable by root alone: the daemon refuses a
# managed file that another user could change (it could send sign-ins elsewhere).
# `signin-broker status` says which file set each provider setting.
# The settings, in full: `man signin-brokerd`.
"""


def template() -> str:
    os.environ.update(HOME="~", XDG_RUNTIME_DIR="$XDG_RUNTIME_DIR")
    for name in [n for n in os.environ if n.startswith(("XDG_STATE", "XDG_CONFIG", "SIGNIN"))]:
        del os.environ[name]
    parts = [HEADER]
    for option in OPTIONS:
        default = option.default()
        shown = "{}" if isinstance(default, dict) else f'"{default}"'
        if isinstance(default, str) and default.isdigit():
            shown = default
        lines = textwrap.wrap(option.help + ".", width=84)
        if option.name in PROVIDER_KEYS:
            lines.append("Also in a [providers.<alias>] table, for another provider.")
        lines.append(f"Or the flag --{option.name.replace('_', '-')}, or ${env_name(option.name)}.")
        parts.append("\n".join(f"# {line}" for line in lines) + f"\n#{option.name} = {shown}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    print(template(), end="")
