"""How a command fails: its exit status, the one line it says, and the CLI's exceptions.

On the gRPC and JSON paths alike. Exit status: 0 ok, 1 the daemon refused or failed, 2
usage, 3 the daemon is not running, 4 not signed in. The exceptions: Refused (a token
could not be had, said already), ProtocolError and HostRefusal (the native host's
frames, and the daemon's refusals through it), PasteError (a pasted sign-in address
that cannot be used).
"""

from __future__ import annotations

import sys

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DAEMON_NOT_RUNNING = 3
EXIT_NOT_SIGNED_IN = 4

HOW_TO_START = (
    "Start it with `signin-brokerd` (it runs in the foreground), or where it is installed"
    " as a service: `systemctl --user start signin-broker.socket`."
)


def tooling_missing(what: str) -> str:
    """What to install for a command of the test tooling (signin-broker-testing)."""
    from .._version import __version__

    return (
        f"{what} is test tooling, not part of the base install: install the"
        f" signin-broker-testing wheel of this version beside it (pip install"
        f" signin_broker_testing-{__version__}-py3-none-any.whl; in the source tree,"
        " python -m pip wheel --no-deps -w dist packaging/testing builds it)"
    )


def missing_package(error: ModuleNotFoundError, package: str) -> bool:
    """Whether the error is that package being absent, not a bug inside it."""
    name = error.name or ""
    return name == package or name.startswith(f"{package}.")


def complain(message: str) -> None:
    """Say what went wrong, on stderr (stdout is for data)."""
    print(f"signin-broker: {message}", file=sys.stderr)


def not_running(socket_path: str, why_not_started: str = "") -> int:
    """Nothing serves the socket (and it was not started: why): say how to start the daemon."""
    if why_not_started:
        complain(f"the signin-broker daemon is not running: {why_not_started}")
    else:
        complain(
            f"the signin-broker daemon is not running (nothing serves {socket_path})."
            f" {HOW_TO_START}"
        )
    return EXIT_DAEMON_NOT_RUNNING


def not_signed_in(reason: str) -> int:
    """The daemon has no session for the request: say how to sign in."""
    complain(f"not signed in ({reason}). Run `signin-broker login`.")
    return EXIT_NOT_SIGNED_IN


def dpop_bound(tool: str, bound_by: str) -> int:
    """The token is DPoP-bound (RFC 9449) and `tool` can send no proof: say why, and what to do.

    `bound_by`: "provider" when the provider requires DPoP of the broker's client (no
    setting here can give Bearer tokens then), else the provider's `dpop` setting.
    """
    if bound_by == "provider":
        complain(
            f"{tool} cannot send DPoP proofs, and this account's tokens are DPoP-bound: its"
            " identity provider requires DPoP of the broker's client (it refused a sign-in"
            " without a proof), whatever the `dpop` setting says. Use a tool that sends"
            " proofs (`signin-broker token --format dpop`, the SDK, the HTTP auths), or ask"
            " the provider's administrator for a client without dpop_bound_access_tokens"
        )
    else:
        complain(
            f"{tool} cannot send DPoP proofs, and this account's tokens are DPoP-bound by its"
            " provider's `dpop` setting (auto or require; auto was the default for sign-ins"
            f' of earlier versions). To use {tool}, set dpop = "if-required" for that'
            " provider or leave it unset (SIGNIN_BROKER_DPOP, `dpop` in config.toml or its"
            " [providers.<alias>] table, or an organisation's file in /etc/xdg/signin-broker),"
            " restart the daemon and sign in again"
        )
    return EXIT_FAILED


def refused(code: str, reason: str) -> int:
    """The daemon refused the request: its status (lower case) and its words."""
    complain(f"{code}: {reason}")
    return EXIT_FAILED


class Refused(Exception):
    """The token could not be had; `status` is the command's exit status (said already)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class ProtocolError(Exception):
    """The stream from the browser breaks the native messaging protocol."""


class HostRefusal(Exception):
    """The daemon refused a browser's request, or could not be asked; `code` is its status."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class PasteError(Exception):
    """The pasted address cannot be used; the message says why."""
