r"""Writes the manual pages: signin-broker(1), signin-brokerd(1) and signin-broker.toml(5).

    python scripts/manpages.py [FOLDER]      # default: man/

Every command, option and setting comes from the code (the CLI's parsers, the daemon's
table of settings); what each page says around them (DESCRIPTION, ENVIRONMENT, FILES,
EXIT STATUS, EXAMPLES, SEE ALSO) is written below, as ssh-agent(1), git-credential(1) and
ssh_config(5) write theirs. A paragraph is one line of roff, filled by man at the
reader's width: no break is baked into a path, and every `-` is a `\-`, where man never
breaks a line. The pages are committed and shipped (the wheel's share/man, the Debian
package); tests/unit/test_manual_pages.py regenerates them and fails when the code
changed without them, and checks each lists every setting, variable and command. They
are not made at build time: the build's isolated environment lacks what the CLI's
parsers import (the conformance surfaces, for one).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packaging" / "debian"))

from config_toml import shown_defaults  # noqa: E402 - the path above

from signin_broker.cli._exec import TOKEN_TYPE_ENV  # noqa: E402
from signin_broker.cli._failures import (  # noqa: E402
    EXIT_DAEMON_NOT_RUNNING,
    EXIT_FAILED,
    EXIT_NOT_SIGNED_IN,
    EXIT_USAGE,
)
from signin_broker.cli._flags import DEFAULT_ENV_NAME  # noqa: E402
from signin_broker.cli._try import ISSUER_ENV  # noqa: E402
from signin_broker.cli.table import full_parser  # noqa: E402
from signin_broker.daemon.options import OPTIONS, PROVIDER_KEYS, env_name  # noqa: E402
from signin_broker.daemon.settings import argument_parser  # noqa: E402
from signin_broker.locations import SOCKET_ENV  # noqa: E402

DATE = "2026-11-24"  # fixed, so a page changes only when what it says does
MANUAL = "signin-broker manual"
TICKED = re.compile(r"`([^`]+)`")


def text(words: str) -> str:
    """Words as roff: backslashes and dashes escaped, `code` in bold, no line that is a request."""
    escaped = words.replace("\\", "\\e").replace("-", "\\-")
    escaped = TICKED.sub(r"\\fB\1\\fR", escaped)
    return "\n".join("\\&" + line if line[:1] in ".'" else line for line in escaped.split("\n"))


def bold(words: str) -> str:
    return f"\\fB{text(words)}\\fR"


def italic(words: str) -> str:
    return f"\\fI{text(words)}\\fR"


def section(name: str, *paragraphs: str) -> list[str]:
    return [f".SH {name}", *(f".PP\n{text(p)}" for p in paragraphs)]


def item(term: str, description: str) -> str:
    """A tagged paragraph; term is roff already (bold(), italic())."""
    return f".TP\n{term}\n{text(description)}"


def example(lines: Iterable[str]) -> str:
    """Lines as typed, unfilled and indented."""
    return ".PP\n.RS 4\n.nf\n" + "\n".join(text(line) for line in lines) + "\n.fi\n.RE"


def header(name: str, number: int, summary: str) -> list[str]:
    title = text(name.upper())
    return [
        f'.TH {title} {number} {text(DATE)} "signin\\-broker" "{MANUAL}"',
        ".nh",
        ".ad l",
        ".SH NAME",
        f"{text(name)} \\- {text(summary)}",
    ]


def see_also(*pages: str) -> list[str]:
    """Other pages, each `name(section)`."""
    named = (page.partition("(") for page in pages)
    return [".SH SEE ALSO", ",\n".join(f"{bold(name)}({rest}" for name, _, rest in named)]


# -- options from the parsers ------------------------------------------------------------


def spelled(action: argparse.Action) -> str:
    """An option as its synopsis writes it: --format FORMAT, ACTION {set,delete}, -- COMMAND."""
    if action.metavar:
        value = italic(str(action.metavar))
    elif action.choices and not isinstance(action.choices, dict):
        value = text("{" + ",".join(map(str, action.choices)) + "}")
    else:
        value = italic(action.dest.upper())
    if not action.option_strings:
        return value
    flags = ", ".join(bold(flag) for flag in action.option_strings)
    return flags if action.nargs == 0 else f"{flags} {value}"


def options(parser: argparse.ArgumentParser, leave_out: Iterable[str] = ()) -> Iterator[str]:
    """An item per option of the parser (its own: help and the global ones left out)."""
    skipped = set(leave_out)
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.help == argparse.SUPPRESS or action.dest in skipped:
            continue
        yield item(spelled(action), (action.help or "").replace("%(prog)s", parser.prog))


def subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each sub-command, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, helps[name], sub) for name, sub in action.choices.items()]
    return []


# -- signin-broker(1) --------------------------------------------------------------------

CLIENT_DESCRIPTION = (
    "signin-broker is the client of signin-brokerd(1), the daemon that owns a person's"
    " OpenID Connect sign-in and hands access tokens to their other programs over a Unix"
    " socket. Each command asks that daemon: for a token (`token`, `exec`, the git and"
    " docker credential helpers), to sign in or out (`login`, `logout`), what it holds"
    " (`status`, `accounts`, `apps`, `audit`), to open a forward into an SSH session or"
    " a container (`forward`), or to check the set-up (`doctor`); others set things up on"
    " this machine (`install-service`, `install-browser`, `completion`, `client-secret`)"
    " or try it with a stub provider (`try`). A command never signs in by itself and"
    " never stores a token: the daemon does both.",
    "Data goes to standard output, one value or, with `--json`, one JSON document;"
    " messages go to standard error. The daemon is found at `$SIGNIN_BROKER_SOCKET`,"
    " else `$XDG_RUNTIME_DIR/signin-broker/broker.sock`; where it runs as a user service"
    " (the Debian package, or `signin-broker install-service`), the first command starts"
    " it through that socket. `signin-broker token` answers without loading the rest of"
    " the program, for scripts that call it often.",
    "git-credential-signin-broker and docker-credential-signin-broker are the"
    " `git-credential` and `docker-credential` commands under the names git and docker"
    " look for.",
)
CLIENT_ENVIRONMENT = {
    SOCKET_ENV: "the daemon's socket, where no --socket is given;"
    " `signin-broker try` sets it for its shell",
    "XDG_RUNTIME_DIR": "the folder of the daemon's default socket,"
    " $XDG_RUNTIME_DIR/signin-broker/broker.sock",
    "SIGNIN_BROKER_BROWSER": "the command `login` and `logout --browser` open an address"
    " with ({url} in it stands for the address; else it is appended), instead of the"
    " system's browser",
    DEFAULT_ENV_NAME: "set by `exec` for its command: the access token (--env names"
    " another variable)",
    TOKEN_TYPE_ENV: "set by `exec` for its command: Bearer, or DPoP for a token bound to"
    " the daemon's key",
    ISSUER_ENV: "set by `try` for its shell: the stub provider's issuer",
    "KUBERNETES_EXEC_INFO": "read by `token --format exec-credential`: the ExecCredential"
    " version kubectl asks for",
    "SIGNIN_BROKER_CONFORMANCE_ADMIN_TOKEN": "the staging provider's admin token for"
    " `conformance --issuer` (case I2), kept out of the command line",
    "XDG_CONFIG_HOME": "where `install-service` writes the user units"
    " ($XDG_CONFIG_HOME/systemd/user, default ~/.config/systemd/user)",
    "CHROME_CONFIG_HOME": "where `install-browser --browser chrome` writes its manifest, if set",
    "NO_COLOR": "set: `tui` and `conformance` draw without colours",
}
CLIENT_FILES = {
    "$XDG_RUNTIME_DIR/signin-broker/broker.sock": "the daemon's socket (0600, in a 0700"
    " folder): gRPC and JSON calls, each caller checked by the kernel",
    "~/.config/signin-broker/config.toml": "the daemon's settings; `doctor --config` checks"
    " another file (see signin-broker.toml(5))",
    "~/.config/systemd/user/signin-broker.socket, signin-broker.service": "the user units"
    " `install-service` writes (the Debian package ships its own in /usr/lib/systemd/user)",
    "~/Library/LaunchAgents/org.signin-broker.daemon.plist": "the launchd agent"
    " `install-service` writes on macOS",
}
CLIENT_EXAMPLES = (
    "Sign in, then use the token in curl and in a script:",
    (
        "signin-broker login",
        'curl -H "$(signin-broker token --format header)" https://api.example.com/me',
        "signin-broker exec -- ./deploy.sh",
    ),
    "Let git ask the broker for a host's password:",
    (
        'git config --global credential.https://git.example.com.helper "signin-broker'
        ' --username oauth2"',
    ),
    "Hand an SSH session tokens, and nothing else, for eight hours; on the far side,"
    " point SIGNIN_BROKER_SOCKET at the forwarded socket:",
    (
        "fwd=$(signin-broker forward --name devbox --ttl 28800)",
        'ssh -o ExitOnForwardFailure=yes -R /home/me/.signin-broker.sock:"$fwd" devbox',
    ),
    "Try it with a stub provider, touching nothing of yours:",
    ("signin-broker try",),
)


def client_page() -> str:
    top = full_parser()
    top.prog = "signin-broker"
    lines = header("signin-broker", 1, "ask the signin-broker daemon for tokens, sign in")
    lines += [
        ".SH SYNOPSIS",
        f"{bold('signin-broker')} [{bold('--socket')} {italic('PATH')}]"
        f" [{bold('--timeout')} {italic('SECONDS')}] {italic('COMMAND')} [{italic('OPTIONS')}]",
        ".br",
        f"{bold('git-credential-signin-broker')} get|store|erase",
        ".br",
        f"{bold('docker-credential-signin-broker')} get|store|erase|list",
    ]
    lines += section("DESCRIPTION", *CLIENT_DESCRIPTION)
    lines += [".SH OPTIONS", ".PP", text("Before the command, or after it (then they win):")]
    lines += options(top, leave_out=["command"])
    lines += [".SH COMMANDS", ".PP", text("Each takes --json and the options above.")]
    for name, help_text, parser in subparsers(top):
        lines += [f".SS {text(name)}", text(help_text)]
        lines += options(parser, leave_out=["json", "socket", "timeout"])
        for sub_name, sub_help, sub in subparsers(parser):
            lines += [f".SS {text(f'{name} {sub_name}')}", text(sub_help)]
            lines += options(sub, leave_out=["json", "socket", "timeout"])
    lines += [".SH ENVIRONMENT", *(item(bold(k), v) for k, v in CLIENT_ENVIRONMENT.items())]
    lines += [".SH FILES", *(item(italic(k), v) for k, v in CLIENT_FILES.items())]
    lines += [
        ".SH EXIT STATUS",
        item(bold("0"), "done"),
        item(bold(str(EXIT_FAILED)), "the daemon refused or failed (it says why)"),
        item(bold(str(EXIT_USAGE)), "a usage error, or a command whose package is missing"),
        item(bold(str(EXIT_DAEMON_NOT_RUNNING)), "the daemon is not running"),
        item(bold(str(EXIT_NOT_SIGNED_IN)), "not signed in: run `signin-broker login`"),
        ".PP",
        text(
            "`exec` and `try` end with their command's status (126: it cannot run; 127: not"
            " found; 128+N: killed by signal N)."
        ),
    ]
    lines += [".SH EXAMPLES", *_examples(CLIENT_EXAMPLES)]
    lines += see_also(
        "signin-brokerd(1)",
        "signin-broker.toml(5)",
        "gitcredentials(7)",
        "ssh-agent(1)",
        "systemd.socket(5)",
    )
    return "\n".join(lines) + "\n"


def _examples(parts: tuple[str | tuple[str, ...], ...]) -> Iterator[str]:
    for part in parts:
        yield f".PP\n{text(part)}" if isinstance(part, str) else example(part)


# -- signin-brokerd(1) --------------------------------------------------------------------

DAEMON_DESCRIPTION = (
    "signin-brokerd owns one person's OpenID Connect sign-in: it signs them in through"
    " their browser (authorization code with PKCE) or another device (the device code),"
    " keeps the session renewed, notices a revocation at the provider within"
    " revalidate_seconds, and hands access tokens to that person's programs over gRPC,"
    " or JSON, on a Unix socket, as ssh-agent(1) hands out keys. The kernel names each"
    " caller (SO_PEERCRED): a process of another user is refused before a byte is read,"
    " and each program gets what the person's policy for it says (see apps in"
    " signin-broker(1)). Sessions are kept encrypted in the state folder, under a key in"
    ' the desktop\'s keyring (the Secret Service) or, with key_store = "file", in a file'
    " beside them; every token handed out and every change is a row of the audit log.",
    "It runs in the foreground and logs JSON lines to standard error. A user service"
    " starts it: systemd's signin-broker.socket listens on the socket and starts"
    " signin-broker.service at the first connection (the daemon takes the socket it is"
    " given, reports READY=1 and pings the watchdog), or launchd's agent on macOS. One"
    " daemon serves one user; it refuses to start where another daemon serves the"
    " socket. SIGTERM or SIGINT stop it cleanly.",
    "Each setting is a flag, an environment variable and a key of the config files;"
    " flags win over variables, which win over the person's file, which wins over the"
    " managed files an administrator writes. Every setting, its default and the files:"
    " signin-broker.toml(5).",
)
DAEMON_ENVIRONMENT = {
    env_name("config"): "the config file, where no --config is given",
    "XDG_CONFIG_HOME": "the folder of the person's config file (default ~/.config)",
    "XDG_CONFIG_DIRS": "the folders of the managed config files (default /etc/xdg)",
    "XDG_STATE_HOME": "the folder of the state folder (default ~/.local/state)",
    "XDG_RUNTIME_DIR": "the folder of the socket",
    "LISTEN_FDS, LISTEN_PID": "the socket systemd passes (sd_listen_fds(3))",
    "NOTIFY_SOCKET, WATCHDOG_USEC": "where to report READY=1 and the watchdog's"
    " interval (sd_notify(3))",
    "PYTHON_KEYRING_BACKEND": "a keyring backend other than the desktop's, by class name",
    "SSL_CERT_FILE, SSL_CERT_DIR": "CA certificates to trust for the provider instead of"
    " the system's",
    "DISPLAY, WAYLAND_DISPLAY": "set: the session can show a browser (else a sign-in an"
    " app begins offers a code for another device)",
}
DAEMON_FILES = {
    "$XDG_RUNTIME_DIR/signin-broker/broker.sock": "the socket (0600, its folder 0700)",
    "~/.config/signin-broker/config.toml": "the person's settings",
    "/etc/xdg/signin-broker/config.toml, /etc/xdg/signin-broker/config.d/*.toml": "the"
    " managed settings, writable by root alone (signin-broker.toml(5))",
    "~/.config/signin-broker/apps.toml": "the decisions of `signin-broker apps`"
    " (the app_policy setting)",
    "~/.local/state/signin-broker/": "the state folder (state_dir, 0700): accounts/ holds"
    " the encrypted sessions, audit.sqlite3 the audit log, keys.json the key where"
    " key_store is file",
    "/usr/lib/systemd/user/signin-broker.socket, signin-broker.service": "the user units of"
    " the Debian package (`signin-broker install-service` writes its own to"
    " ~/.config/systemd/user)",
}
DAEMON_EXAMPLES = (
    "Run it in the foreground for a provider, with its sign-in page on another port:",
    ("signin-brokerd --issuer https://id.example.com --http 127.0.0.1:8766",),
    "Start it as a user service, and read its log:",
    (
        "systemctl --user start signin-broker.socket",
        "journalctl --user -u signin-broker.service",
    ),
)


def daemon_page() -> str:
    parser = argument_parser()
    lines = header("signin-brokerd", 1, "the per-user OpenID Connect sign-in daemon")
    lines += [".SH SYNOPSIS", f"{bold('signin-brokerd')} [{italic('OPTIONS')}]"]
    lines += section("DESCRIPTION", *DAEMON_DESCRIPTION)
    lines += [".SH OPTIONS", *options(parser)]
    lines += [".SH ENVIRONMENT", *(item(bold(k), v) for k, v in DAEMON_ENVIRONMENT.items())]
    lines += [
        ".PP",
        text(
            "Each setting, its variable: a SIGNIN_BROKER_ variable that is none is named in a"
            " warning at start."
        ),
    ]
    lines += [
        item(bold(env_name(option.name)), f"{option.name} (--{option.name.replace('_', '-')})")
        for option in OPTIONS
    ]
    lines += [".SH FILES", *(item(italic(k), v) for k, v in DAEMON_FILES.items())]
    lines += [
        ".SH EXIT STATUS",
        item(bold("0"), "stopped when told to (SIGTERM, SIGINT)"),
        item(
            bold("1"),
            "it cannot start (another daemon serves the socket; an unsafe socket or state"
            " folder; a port taken), or its stop hung (every thread's stack on stderr)",
        ),
        item(bold("2"), "a setting is wrong (stderr names it and where it was set)"),
    ]
    lines += [".SH EXAMPLES", *_examples(DAEMON_EXAMPLES)]
    lines += see_also(
        "signin-broker(1)",
        "signin-broker.toml(5)",
        "systemd.socket(5)",
        "sd_notify(3)",
        "ssh-agent(1)",
    )
    return "\n".join(lines) + "\n"


# -- signin-broker.toml(5) ----------------------------------------------------------------

CONFIG_DESCRIPTION = (
    "signin-brokerd(1) reads its settings from TOML files: first the managed files an"
    " administrator writes for every user of the machine, signin-broker/config.toml and"
    " then signin-broker/config.d/*.toml in name order, in each folder of"
    " $XDG_CONFIG_DIRS (default /etc/xdg; the first folder named wins); then the person's"
    " own, $XDG_CONFIG_HOME/signin-broker/config.toml (~/.config/signin-broker/config.toml),"
    " or the file --config or $SIGNIN_BROKER_CONFIG names. A later file's value wins over"
    " an earlier one's, key by key; the environment variable of a setting wins over the"
    " files, and its flag over all. `signin-broker status` says where each provider"
    " setting came from.",
    "A managed file that a user other than root could change could send every sign-in to"
    " another provider: the daemon refuses to start with one (or one reached through such"
    " a folder or symlink) and says what makes it safe. It remembers the managed files it"
    " read, and `signin-broker status` and `doctor` say so when one is gone.",
    "The daemon reads the files when it starts: `systemctl --user restart"
    " signin-broker.service` makes a running one read them again. A key it does not know"
    " stops it with the key's name.",
)
PROVIDERS_TEXT = (
    "A table per further provider, named by an alias of your choosing (not main, the"
    " name of the one the top-level keys describe). It takes the provider keys: "
    + ", ".join(PROVIDER_KEYS)
    + ". The default_provider setting names the one a sign-in that names none goes to;"
    " `signin-broker login --provider ALIAS` names another."
)
CONFIG_EXAMPLES = (
    "A person's file for one provider:",
    ('issuer = "https://id.example.com"', 'client_id = "my-desktop"'),
    "A managed file, /etc/xdg/signin-broker/config.toml, for two providers, every user"
    " asked before an app gets its first token:",
    (
        'issuer = "https://id.example.com"',
        'scopes = "openid profile email offline_access"',
        'new_apps = "ask"',
        "",
        "[providers.github]",
        'issuer = "https://token.actions.githubusercontent.com"',
        'client_id = "my-desktop"',
    ),
)


def config_page() -> str:
    flags = {a.dest: a.option_strings[-1] for a in argument_parser()._actions if a.option_strings}
    lines = header("signin-broker.toml", 5, "settings of the signin-broker daemon")
    lines += [
        ".SH SYNOPSIS",
        italic("~/.config/signin-broker/config.toml"),
        ".br",
        italic("/etc/xdg/signin-broker/config.toml"),
        ".br",
        italic("/etc/xdg/signin-broker/config.d/*.toml"),
    ]
    lines += section("DESCRIPTION", *CONFIG_DESCRIPTION)
    lines += [".SH SETTINGS", ".PP", text("Each key, its default, its flag and its variable:")]
    for option, default in zip(OPTIONS, shown_defaults().values(), strict=True):
        where = " Also a key of [providers.ALIAS]." if option.name in PROVIDER_KEYS else ""
        lines.append(
            item(
                f"{bold(option.name)} = {italic(default)}",
                f"{option.help[:1].upper()}{option.help[1:]}.{where} The flag"
                f" {flags[option.name]} {option.metavar}, or ${env_name(option.name)}.",
            )
        )
    lines += [item(bold("[providers.ALIAS]"), PROVIDERS_TEXT)]
    lines += [".SH EXAMPLES", *_examples(CONFIG_EXAMPLES)]
    lines += [
        ".SH FILES",
        item(italic("~/.config/signin-broker/config.toml"), "the person's settings"),
        item(
            italic("/etc/xdg/signin-broker/config.toml"),
            "the managed settings; the Debian package ships it with every key as a comment",
        ),
        item(italic("/etc/xdg/signin-broker/config.d/"), "more managed files, read in name order"),
    ]
    lines += see_also("signin-brokerd(1)", "signin-broker(1)")
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Each page's text, by its file name."""
    return {
        "signin-broker.1": client_page(),
        "signin-brokerd.1": daemon_page(),
        "signin-broker.toml.5": config_page(),
    }


def main(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, page in pages().items():
        (folder / file_name).write_text(page)
        print(folder / file_name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "man")
