"""Commands a run against a staging provider calls where the stub needs none.

A real provider has a login page, a device-code confirmation and an admin API of its
own, so the person and the admin of the I cases can be plugged in: a command that signs
the test user in through the browser, one that approves a device code, one that revokes
the test user. Each is split as a shell would split it but run without one; a
{placeholder} is replaced inside each argument, so a value can never become a second
argument or a shell command. Each is bounded by a timeout. Their stdout is read (the
browser login's address) or dropped and their stderr passes through to the terminal:
neither ever reaches a case's reason, the registry or the grid, for either may hold a
code, a cookie or an admin credential.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass

PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
DEFAULT_TIMEOUT_SECONDS = 60.0

# The placeholders each hook is given (what its option's help and the README list).
BROWSER_LOGIN = ("url", "redirect_uri", "issuer", "client_id")
APPROVE_DEVICE = (
    "user_code",
    "verification_uri",
    "verification_uri_complete",
    "issuer",
    "client_id",
)
REVOKE = ("sub", "issuer", "client_id")


@dataclass(frozen=True, slots=True)
class Hook:
    """A command line with {placeholders}, run without a shell and within a timeout."""

    option: str  # the option that set it, to name it in a case's reason
    argv: tuple[str, ...]
    timeout: float  # seconds

    @classmethod
    def parse(cls, option: str, line: str, allowed: tuple[str, ...], timeout: float) -> Hook:
        """Split `line` as a shell would; ValueError for bad quoting or an unknown placeholder."""
        try:
            argv = tuple(shlex.split(line))
        except ValueError as error:
            raise ValueError(f"{option} cannot be split into arguments: {error}") from None
        if not argv:
            raise ValueError(f"{option} is empty")
        unknown = sorted({name for arg in argv for name in PLACEHOLDER.findall(arg)} - {*allowed})
        if unknown:
            raise ValueError(
                f"{option} names {', '.join('{' + n + '}' for n in unknown)};"
                f" it is given {', '.join('{' + n + '}' for n in allowed)}"
            )
        return cls(option, argv, timeout)

    def run(self, **values: str) -> str:
        """Run it with the placeholders filled in; its stdout.

        AssertionError when it cannot start, times out (its process group is killed)
        or exits non-zero: the reason says which, never what it printed.
        """
        argv = [PLACEHOLDER.sub(lambda found: values[found.group(1)], arg) for arg in self.argv]
        try:
            process = subprocess.Popen(  # noqa: S603 - the user's own command, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,  # its own group, so a timeout ends its children too
            )
        except OSError as error:
            raise AssertionError(
                f"{self.option} could not be started: {error.strerror or type(error).__name__}"
            ) from None
        try:
            stdout, _ = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            if process.stdout is not None:
                process.stdout.close()
            raise AssertionError(
                f"{self.option} did not finish within {self.timeout:g} s"
            ) from None
        if process.returncode != 0:
            raise AssertionError(
                f"{self.option} exited {process.returncode}"
                " (its output is not recorded: it may hold secrets)"
            )
        return stdout
