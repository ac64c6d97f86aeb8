"""`signin-broker install-browser`: the native messaging manifests that let extensions in.

Each browser looks for a host's manifest (`<host name>.json`) in folders of its own;
the manifest names the host program (`path`) and the extensions that may start it
(Chromium and Chrome: `allowed_origins`, Firefox: `allowed_extensions`). The browser
refuses any other extension before the host starts. Which web origins an extension may
get tokens for is the app policy's (`signin-broker apps allow 'browser:...' --origin`).

`host_manifest` and `--manifest-dir`/`--host-path` are also how a system package
writes the manifests for every user (SYSTEM_FOLDERS).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from ..identities import CHROMIUM_EXTENSION_ID
from ..identities import FIREFOX_EXTENSION_ID as FIREFOX_ID
from ..json_depth import within_depth
from ..locations import NATIVE_HOST_NAME, NATIVE_HOST_PROGRAM, program_folders
from ._failures import EXIT_FAILED, EXIT_USAGE, complain

BROWSERS = ("chromium", "chrome", "firefox")
FIREFOX = "firefox"
CHROMIUM_ID = re.compile(rf"(?:chrome-extension://)?({CHROMIUM_EXTENSION_ID.pattern})/?")
# The reference extension shipped in the package (signin_broker/extension/): Chromium
# derives its id from the manifest's `key`, Firefox reads it from the manifest.
REFERENCE_EXTENSION = Path(__file__).resolve().parent.parent / "extension"
REFERENCE_IDS = {
    "chromium": "cebidliipbcfhdfgddngepmjegpjahaj",
    FIREFOX: "reference@signin-broker.invalid",
}
# Where a browser's packages read manifests for every user (a system package writes there).
SYSTEM_FOLDERS = {
    "chromium": "/etc/chromium/native-messaging-hosts",
    "chrome": "/etc/opt/chrome/native-messaging-hosts",
    FIREFOX: "/usr/lib/mozilla/native-messaging-hosts",
}
# The browsers' executables on PATH, to find which are installed.
EXECUTABLES = {
    "chromium": ("chromium", "chromium-browser"),
    "chrome": ("google-chrome", "google-chrome-stable"),
    FIREFOX: ("firefox", "firefox-esr"),
}


def add_options(parser: argparse.ArgumentParser) -> None:
    """Which browsers, which extensions, and where (for packagers)."""
    parser.add_argument(
        "--browser",
        dest="browsers",
        action="append",
        choices=BROWSERS,
        default=[],
        help="a browser to write the manifest for; repeat for more (default: each installed)",
    )
    parser.add_argument(
        "--extension",
        dest="extensions",
        action="append",
        default=[],
        metavar="ID",
        help="an extension that may reach the broker: a Chromium id (32 letters a-p) or a"
        " Firefox add-on id (name@domain); repeat for more (default: the reference extension)",
    )
    parser.add_argument(
        "--uninstall", action="store_true", help="remove the manifests instead of writing them"
    )
    parser.add_argument(
        "--manifest-dir",
        type=Path,
        metavar="DIR",
        help="write the manifest into DIR instead of the browser's own folder, e.g. a system"
        " package's /etc/chromium/native-messaging-hosts (with one --browser)",
    )
    parser.add_argument(
        "--host-path",
        metavar="PATH",
        help=f"the host program the manifest names (default: this installation's"
        f" {NATIVE_HOST_PROGRAM})",
    )


def install_browser(args: argparse.Namespace) -> int:
    """Write (or remove) each browser's manifest; say where, and what comes next."""
    browsers = chosen_browsers(args.browsers, args.uninstall)
    if not browsers:
        complain("no Chromium, Chrome or Firefox found: name one with --browser")
        return EXIT_USAGE
    if args.manifest_dir is not None and len(browsers) != 1:
        complain("--manifest-dir writes one browser's manifest: name exactly one --browser")
        return EXIT_USAGE
    done = []
    try:
        for browser in browsers:
            folder = args.manifest_dir or user_folder(browser)
            target = folder / f"{NATIVE_HOST_NAME}.json"
            if args.uninstall:
                done.append(
                    {"browser": browser, "manifest": str(target), "removed": _remove(target)}
                )
                continue
            extensions = extensions_for(browser, args.extensions)
            host = args.host_path or host_program()
            write_manifest(target, host_manifest(browser, extensions, host))
            done.append(
                {
                    "browser": browser,
                    "manifest": str(target),
                    "host": host,
                    "extensions": extensions,
                }
            )
    except ValueError as error:
        complain(str(error))
        return EXIT_USAGE
    except OSError as error:
        complain(f"cannot write the manifest: {error}")
        return EXIT_FAILED
    _tell(done, args.json)
    return 0


def chosen_browsers(named: list[str], uninstall: bool) -> list[str]:
    """The browsers named; else every one to remove, and each one installed to write.

    A manifest outlives its browser (uninstalled, or run from elsewhere than PATH), so
    removing looks wherever any browser reads one.
    """
    if named:
        return list(dict.fromkeys(named))
    return list(BROWSERS) if uninstall else installed_browsers()


def installed_browsers() -> list[str]:
    """The browsers whose executable is on PATH."""
    return [name for name in BROWSERS if any(map(shutil.which, EXECUTABLES[name]))]


def user_folder(browser: str) -> Path:
    """Where the browser reads a user's host manifests.

    Chromium and Chrome read `NativeMessagingHosts` in their user data folder, which is
    `$CHROME_CONFIG_HOME` or `$XDG_CONFIG_HOME` (`~/.config`) and the browser's name
    unless it is started with `--user-data-dir` (then the manifest goes there:
    --manifest-dir). Firefox reads `~/.mozilla/native-messaging-hosts`.
    """
    home = Path.home()
    if sys.platform == "darwin":
        support = home / "Library" / "Application Support"
        mac = {"chromium": "Chromium", "chrome": "Google/Chrome", FIREFOX: "Mozilla"}
        return support / mac[browser] / "NativeMessagingHosts"
    if browser == FIREFOX:
        return home / ".mozilla" / "native-messaging-hosts"
    config = os.environ.get("CHROME_CONFIG_HOME") or os.environ.get("XDG_CONFIG_HOME")
    base = Path(config) if config and Path(config).is_absolute() else home / ".config"
    return (
        base / {"chromium": "chromium", "chrome": "google-chrome"}[browser] / "NativeMessagingHosts"
    )


def extensions_for(browser: str, given: list[str]) -> list[str]:
    """The extension ids of this browser's kind among those given (default: the reference's)."""
    if not given:
        return [REFERENCE_IDS[FIREFOX if browser == FIREFOX else "chromium"]]
    pattern = FIREFOX_ID if browser == FIREFOX else CHROMIUM_ID
    fitting = [
        match.group(0 if browser == FIREFOX else 1)
        for match in map(pattern.fullmatch, given)
        if match
    ]
    if not fitting:
        kind = "name@domain or {GUID}" if browser == FIREFOX else "32 letters a-p"
        raise ValueError(f"no --extension is a {browser} extension id ({kind})")
    return list(dict.fromkeys(fitting))


def host_program() -> str:
    """The host program of this installation: the first of the program folders that has it."""
    for folder in program_folders():
        program = Path(folder, NATIVE_HOST_PROGRAM)
        if os.access(program, os.X_OK):
            return str(program)
    raise ValueError(
        f"{NATIVE_HOST_PROGRAM} is not installed beside this signin-broker (reinstall the"
        " package), or name it with --host-path"
    )


def host_manifest(browser: str, extensions: list[str], host: str) -> dict[str, object]:
    """The native messaging manifest of the broker's host, as `browser` reads it."""
    if not Path(host).is_absolute():
        raise ValueError(f"the host program must be named by an absolute path, not {host!r}")
    manifest: dict[str, object] = {
        "name": NATIVE_HOST_NAME,
        "description": "signin-broker: access tokens for the web apps you allow",
        "path": host,
        "type": "stdio",
    }
    if browser == FIREFOX:
        manifest["allowed_extensions"] = extensions
    else:
        manifest["allowed_origins"] = [
            f"chrome-extension://{extension}/" for extension in extensions
        ]
    return manifest


def write_manifest(target: Path, manifest: dict[str, object]) -> None:
    """Write the manifest atomically, readable by the browser (0644), its folder made."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".manifest-", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(manifest, file, indent=2)
            file.write("\n")
        os.chmod(temporary, 0o644)  # noqa: PTH101 - a str from mkstemp
        os.replace(temporary, target)  # noqa: PTH105
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _remove(target: Path) -> bool:
    """Remove the broker's manifest, and only it; whether there was one."""
    try:
        named = json.loads(within_depth(target.read_text())).get("name")
    except FileNotFoundError:
        return False
    except (ValueError, AttributeError):
        named = None
    if named != NATIVE_HOST_NAME:
        raise ValueError(f"{target} is not signin-broker's manifest: left alone")
    target.unlink()
    return True


def _tell(done: list[dict[str, object]], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"manifests": done, "extension": str(REFERENCE_EXTENSION)}, indent=2))
        return
    for row in done:
        if "removed" in row:
            print(
                f"{row['browser']}: {'removed' if row['removed'] else 'none at'} {row['manifest']}"
            )
            continue
        print(f"{row['browser']}: {row['manifest']} (extensions: {', '.join(row['extensions'])})")  # type: ignore[arg-type]
    if done and "removed" not in done[0]:
        first = done[0]
        extension = first["extensions"][0]  # type: ignore[index]
        print(
            f"\nThe reference extension, to load unpacked: {REFERENCE_EXTENSION}\n"
            f"Then allow a web app's origin, e.g.:\n"
            f"  signin-broker apps allow 'browser:{first['browser']}/{extension}'"
            " --origin https://app.example.com"
        )
