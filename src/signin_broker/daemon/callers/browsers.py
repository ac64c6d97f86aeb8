"""Browser extensions as apps: the broker's native host, started by a browser the daemon knows.

A browser starts the native messaging host its manifest names (`signin-broker
install-browser` writes them) with the calling extension's id among the arguments:
`chrome-extension://<id>/` from Chromium and Chrome, the manifest's path and then the
id from Firefox. The daemon sees the host's connection like any other; it takes it for
the extension `browser:<browser>/<id>` only when both hold:

- the caller's program is the broker's own host: the interpreter runs the host program
  (or `signin-broker native-host`) from a folder of this installation (locations.
  program_folders), named there by its absolute path;
- its parent process runs a browser executable the daemon knows (BUILT_IN, or one the
  person added with the `browsers` setting): the very file the daemon finds at that
  path, not one a mount namespace of the caller's own put there (file_system_view);
  and the host's arguments have that browser's form.

A caller that claims to be the host otherwise (started from a shell, a script, or a
browser the daemon does not know, or with arguments that name no extension) is refused
with the reason, never taken for the program it runs. Like every unconfined caller's
identity, this one is advisory against code already running as the user: see the
threat model (docs/explanation/threat-model.md) for what such a process can fake here
and what it cannot.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ...identities import CHROMIUM_EXTENSION_ID as CHROMIUM_ID
from ...identities import FIREFOX_EXTENSION_ID as FIREFOX_ID
from ...identities import AppId, AppKind
from ...locations import APP_NAME, NATIVE_HOST_PROGRAM, program_folders
from ..browser_setting import BROWSER_NAME

HOST_COMMAND = "native-host"  # `signin-broker native-host`
CLI_MODULE = "-m signin_broker.cli"  # `python -m signin_broker.cli native-host`
_CLI_OPTIONS_WITH_VALUE = frozenset({"--socket", "--timeout"})
CHROMIUM_ORIGIN = re.compile(rf"chrome-extension://({CHROMIUM_ID.pattern})/")


class Family(StrEnum):
    """How a browser passes the extension to its host."""

    CHROMIUM = "chromium"  # one argument: chrome-extension://<id>/
    FIREFOX = "firefox"  # two: the host manifest's path, then the extension's id


@dataclass(frozen=True, slots=True)
class KnownBrowser:
    """A browser executable the daemon admits as a native host's parent."""

    name: str  # as in `browser:<name>/<id>`
    family: Family | None  # None: added by the person, either form


# The executables of the browsers' main processes (what /proc/<pid>/exe names; the
# /usr/bin entries are wrappers or links that end there), as Debian, Ubuntu, Fedora,
# Arch and the vendors' own packages install them.
BUILT_IN: dict[str, KnownBrowser] = {
    **dict.fromkeys(
        (
            "/usr/lib/chromium/chromium",
            "/usr/lib/chromium-browser/chromium-browser",
            "/usr/lib64/chromium-browser/chromium-browser",
        ),
        KnownBrowser("chromium", Family.CHROMIUM),
    ),
    **dict.fromkeys(
        (
            "/opt/google/chrome/chrome",
            "/opt/google/chrome-beta/chrome",
            "/opt/google/chrome-unstable/chrome",
        ),
        KnownBrowser("chrome", Family.CHROMIUM),
    ),
    **dict.fromkeys(
        (
            "/usr/lib/firefox-esr/firefox-esr",
            "/usr/lib/firefox/firefox",
            "/usr/lib/firefox/firefox-bin",
            "/usr/lib64/firefox/firefox",
            "/opt/firefox/firefox",
        ),
        KnownBrowser("firefox", Family.FIREFOX),
    ),
}


class NotFromABrowser(Exception):
    """The caller claims to be the native host, and cannot be taken for an extension."""


class BrowserHosts:
    """Which callers are the broker's native host, and which browsers may start it."""

    def __init__(
        self, added: Iterable[tuple[str, str]] = (), folders: Sequence[str] | None = None
    ) -> None:
        self._browsers = dict(BUILT_IN)
        for name, path in added:
            for where in {path, os.path.realpath(path)}:
                self._browsers[where] = KnownBrowser(name, None)
        hosts: set[str] = set()
        clis: set[str] = set()
        for folder in program_folders() if folders is None else folders:
            for programs, name in ((hosts, NATIVE_HOST_PROGRAM), (clis, APP_NAME)):
                path = str(Path(folder, name))
                programs.update({path, os.path.realpath(path)})
        self._hosts, self._clis = frozenset(hosts), frozenset(clis)

    def claimed(self, script: str, arguments: Sequence[str]) -> list[str] | None:
        """What the browser passed, when the caller says it is the native host; else None.

        `arguments` are those after the script. Only the script's name is looked at
        here: a host program elsewhere still claims to be the host (and is refused).
        """
        name = Path(script).name
        if name == NATIVE_HOST_PROGRAM:
            return list(arguments)
        if name != APP_NAME and script != CLI_MODULE:
            return None
        rest = iter(arguments)
        for argument in rest:  # the global options may come before the command
            if argument in _CLI_OPTIONS_WITH_VALUE:
                next(rest, None)
            elif not argument.startswith("-"):
                return list(rest) if argument == HOST_COMMAND else None
        return None

    def extension(self, script: str, absolute: bool, passed: Sequence[str], parent: str) -> AppId:
        """The extension a claimed host speaks for; NotFromABrowser says why it is refused.

        `parent` is the executable of the host's parent process, as the kernel names it.
        """
        if not absolute or (script not in self._hosts and script not in self._clis):
            raise NotFromABrowser(
                f"{script} is not this installation's native host (the daemon admits"
                f" {NATIVE_HOST_PROGRAM} from {', '.join(sorted(self._folders()))})"
            )
        browser = self._browsers.get(parent)
        if browser is None:
            raise NotFromABrowser(
                f"the native host was not started by a browser the daemon knows (its parent"
                f" is {parent or 'unknown'}; a browser of another path is added with the"
                " `browsers` setting)"
            )
        extension = _extension_id(browser.family, passed)
        if extension is None:
            raise NotFromABrowser(
                f"the native host's arguments name no {browser.name} extension"
                f" ({' '.join(passed)[:160]!r})"
            )
        return AppId(AppKind.BROWSER, f"{browser.name}/{extension}")

    def _folders(self) -> set[str]:
        return {str(Path(path).parent) for path in self._hosts}


def names_an_extension(app: str) -> bool:
    """Whether an app id is a well-formed `browser:<browser>/<extension id>`."""
    kind, _, rest = app.partition(":")
    browser, slash, extension = rest.partition("/")
    return (
        kind == AppKind.BROWSER
        and bool(slash)
        and BROWSER_NAME.fullmatch(browser) is not None
        and (CHROMIUM_ID.fullmatch(extension) or FIREFOX_ID.fullmatch(extension)) is not None
    )


@functools.cache
def known_browsers() -> BrowserHosts:
    """The built-in browsers and this installation's host, for callers given no other."""
    return BrowserHosts()


def _extension_id(family: Family | None, passed: Sequence[str]) -> str | None:
    """The extension id in what a browser of this family passed its host, else None."""
    if family in (Family.CHROMIUM, None) and len(passed) == 1:
        chromium = CHROMIUM_ORIGIN.fullmatch(passed[0])
        if chromium:
            return chromium.group(1)
    if family in (Family.FIREFOX, None) and len(passed) == 2:
        manifest, extension = passed
        if manifest.endswith(".json") and FIREFOX_ID.fullmatch(extension):
            return extension
    return None
