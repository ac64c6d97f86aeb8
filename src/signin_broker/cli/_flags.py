"""The flags of `signin-broker token`, declared once: read without argparse, or made argparse's.

`$(signin-broker token)` runs once per shell command; argparse and the `re` it imports
cost it about 10 ms. So the one-shot reads its line with these declarations alone
(read_token_line), for the shapes scripts use and exactly as argparse reads them, and
leaves anything else (help, abbreviations, errors) to argparse, whose arguments are made
from the same declarations (add_flags: the global options in _globals.py, the request's
that exec and the credential helpers share and the token command's own in _options.py,
--json in table.py). tests/unit/test_token_arguments.py holds the two readings to one
answer.
"""

from __future__ import annotations

from ..locations import DEFAULT_TIMEOUT_SECONDS

TYPE_CHECKING = False  # not typing's: it would cost the one-shot about 5 ms
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

FORMATS = ("bare", "header", "json", "env", "exec-credential", "dpop")
DEFAULT_ENV_NAME = "SIGNIN_BROKER_TOKEN"


class Flag:
    """One flag: its name, the attribute it sets, how its value is read, its default and help.

    `read` None: a switch, True when given. `many`: each value given is kept, in a list.
    """

    __slots__ = ("choices", "default", "dest", "help", "many", "metavar", "name", "read")

    def __init__(
        self,
        name: str,
        help_text: str,
        *,
        read: Callable[[str], object] | None = str,
        default: object = "",
        dest: str = "",
        metavar: str | None = None,
        choices: Sequence[str] | None = None,
        many: bool = False,
    ) -> None:
        self.name = name
        self.help = help_text
        self.read = read
        self.default = False if read is None else default
        self.dest = dest or name.removeprefix("--").replace("-", "_")
        self.metavar = metavar
        self.choices = choices
        self.many = many

    def initial(self) -> object:
        """The attribute's value when the flag is not given (a list of its own for `many`)."""
        return [] if self.many else self.default

    def value_of(self, text: str) -> object:
        """The value a text gives the flag; ValueError where argparse would refuse it."""
        if self.read is None or (self.choices is not None and text not in self.choices):
            raise ValueError(text)
        return self.read(text)


GLOBAL_FLAGS = (
    Flag(
        "--socket",
        "the daemon's socket (default: SIGNIN_BROKER_SOCKET"
        " or $XDG_RUNTIME_DIR/signin-broker/broker.sock)",
        default=None,
        metavar="PATH",
    ),
    Flag(
        "--timeout",
        f"how long to wait for the daemon (default {DEFAULT_TIMEOUT_SECONDS:g})",
        read=float,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
    ),
)
JSON_FLAG = Flag("--json", "print JSON for scripts", read=None)
# What a token is asked with: the token command's, exec's and the credential helpers'.
REQUEST_FLAGS = (
    Flag("--account", "the account: its id, alias, e-mail or login (default: the default account)"),
    Flag(
        "--scope",
        "a scope the token must carry; repeat for more",
        dest="scopes",
        metavar="SCOPE",
        many=True,
    ),
    Flag(
        "--min-ttl",
        "the token must stay valid at least this long (default %(default)s)",
        read=int,
        default=0,
        metavar="SECONDS",
    ),
    Flag("--audience", "the resource the token is for (RFC 8707)", metavar="URI"),
)
TOKEN_FLAGS = (
    Flag(
        "--format",
        "bare: the token alone (default); header: an Authorization header line;"
        " json: the token and its details; env: an `export NAME=...` line for eval;"
        " exec-credential: a Kubernetes ExecCredential, for kubectl's exec plugin;"
        " dpop: the Authorization and DPoP header lines of one request (--method, --url)"
        " with a DPoP-bound token (RFC 9449)",
        default="bare",
        choices=FORMATS,
    ),
    Flag("--method", "--format dpop: the request's HTTP method, such as GET"),
    Flag("--url", "--format dpop: the request's absolute URL"),
    Flag("--nonce", "--format dpop: the nonce the server gave (DPoP-Nonce)"),
    Flag(
        "--id-token",
        "the account's ID token instead, where the user allowed this app to have it"
        " (`apps allow APP --id-token`); for kubectl's OIDC set-up",
        read=None,
    ),
    Flag(
        "--env-name",
        f"the variable --format env sets (default {DEFAULT_ENV_NAME})",
        default=DEFAULT_ENV_NAME,
        metavar="NAME",
    ),
    Flag(
        "--acr-values",
        "step-up (RFC 9470): the sign-in behind the token must have one of these"
        " authentication context classes (space-separated); waits for such a sign-in",
        metavar="VALUES",
    ),
    Flag(
        "--max-age",
        "step-up: the person must have authenticated at most this long ago; waits"
        " for such a sign-in",
        read=int,
        default=None,
        metavar="SECONDS",
    ),
)
BEFORE_THE_COMMAND = {flag.name: flag for flag in GLOBAL_FLAGS}
# After `token`: the global options again (they win), --json, the request's, its own.
TOKEN_LINE = {flag.name: flag for flag in (*GLOBAL_FLAGS, JSON_FLAG, *REQUEST_FLAGS, *TOKEN_FLAGS)}


class TokenArguments:
    """The token command's arguments, as argparse's namespace holds them; each flag's default.

    The type of both readings: the one-shot's and argparse's namespace (table.py).
    """

    command: str
    socket: str | None
    timeout: float
    json: bool
    account: str
    scopes: list[str]
    min_ttl: int
    audience: str
    format: str
    method: str
    url: str
    nonce: str
    id_token: bool
    env_name: str
    acr_values: str
    max_age: int | None

    def __init__(self) -> None:
        self.command = "token"
        for flag in TOKEN_LINE.values():
            setattr(self, flag.dest, flag.initial())


def read_token_line(argv: Sequence[str]) -> TokenArguments | None:
    """The `token` command's arguments, or None where argparse must read the line."""
    arguments = TokenArguments()
    flags = BEFORE_THE_COMMAND
    words = iter(argv)
    for word in words:
        if word == "token" and flags is BEFORE_THE_COMMAND:
            flags = TOKEN_LINE
            continue
        name, equals, value = word.partition("=")
        flag = flags.get(name)
        if flag is None:
            return None
        if flag.read is None:
            if equals:  # argparse: "ignored explicit argument"
                return None
            setattr(arguments, flag.dest, True)
            continue
        if not equals:
            following = next(words, None)
            if following is None or following.startswith("-"):
                return None
            value = following
        elif value == "--":  # argparse drops a "--" even from `--socket=--`
            return None
        try:
            given = flag.value_of(value)
        except ValueError:
            return None
        if flag.many:
            getattr(arguments, flag.dest).append(given)
        else:
            setattr(arguments, flag.dest, given)
    return arguments if flags is TOKEN_LINE else None


def add_flags(parser: argparse.ArgumentParser, flags: Sequence[Flag], **defaults: object) -> None:
    """The flags as argparse's arguments; `defaults`, by attribute, stand in for theirs."""
    for flag in flags:
        default = defaults.get(flag.dest, flag.initial())
        help_text = flag.help.replace("%(default)s", str(default))  # man pages read it as it is
        if flag.read is None:
            parser.add_argument(flag.name, action="store_true", default=default, help=help_text)
        elif flag.many:
            parser.add_argument(
                flag.name,
                dest=flag.dest,
                action="append",
                default=default,
                metavar=flag.metavar,
                help=help_text,
            )
        else:
            parser.add_argument(
                flag.name,
                dest=flag.dest,
                type=flag.read,
                default=default,
                metavar=flag.metavar,
                choices=flag.choices,
                help=help_text,
            )


def shell_name(name: str) -> bool:
    """Whether `name` can be a shell variable: [A-Za-z_][A-Za-z0-9_]* (without `re`: 7 ms)."""
    return name.isascii() and name.isidentifier()
