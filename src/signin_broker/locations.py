"""Where the broker's files live: the one place the daemon and its clients agree on paths.

The socket path is decided here for both sides, so an app finds the daemon without
configuration: `SIGNIN_BROKER_SOCKET` when set, otherwise the user's runtime folder
(`$XDG_RUNTIME_DIR/signin-broker/broker.sock` on Linux).
"""

from __future__ import annotations

import os
import stat
import sys

APP_NAME = "signin-broker"
SOCKET_ENV = "SIGNIN_BROKER_SOCKET"
SOCKET_NAME = "broker.sock"
# Set by a client that starts the daemon because nothing serves the socket (autostart):
# the daemon then exits when idle by default (daemon/idle_exit.py).
AUTOSTARTED_ENV = "SIGNIN_BROKER_AUTOSTARTED"
# "0": clients never start the daemon themselves (autostart.py).
AUTOSTART_ENV = "SIGNIN_BROKER_AUTOSTART"
CONFIG_NAME = "config.toml"
APP_POLICY_NAME = "apps.toml"

# The native messaging host: its name in the browsers' manifests, and its program's.
NATIVE_HOST_NAME = "org.signin_broker.native_host"
NATIVE_HOST_PROGRAM = "signin-broker-native-host"

# sun_path holds 108 bytes on Linux (104 on macOS) including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 103
DEFAULT_TIMEOUT_SECONDS = 10.0  # how long a client waits for the daemon to answer
# How long a token request that needs a stronger sign-in (a step-up) waits for the
# person by default (the daemon's step_up_timeout_seconds); clients wait this much more.
STEP_UP_TIMEOUT_SECONDS = 300.0


def resolve_socket(socket_path: str | os.PathLike[str] | None) -> str:
    """The given socket, else SIGNIN_BROKER_SOCKET, else the default in the runtime folder."""
    return os.fspath(socket_path) if socket_path is not None else default_socket_path()


def default_socket_path() -> str:
    """The socket a client connects to and a daemon binds when nothing else is said.

    A plain string, not a Path: pathlib costs the one-shot CLI about 7 ms to import.
    """
    configured = os.environ.get(SOCKET_ENV)
    if configured:
        return configured
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if sys.platform == "linux" and _plainly_private(runtime):
        return os.path.join(runtime, APP_NAME, SOCKET_NAME)
    import warnings

    import platformdirs  # only when needed: it costs the one-shot CLI about 20 ms

    with warnings.catch_warnings():  # its fallback when XDG_RUNTIME_DIR is unset is expected
        warnings.simplefilter("ignore", platformdirs.RuntimeDirWarning)
        return os.path.join(platformdirs.user_runtime_dir(APP_NAME), SOCKET_NAME)


def _plainly_private(runtime: str) -> bool:
    """Whether platformdirs would surely take this XDG_RUNTIME_DIR as it is, told without it.

    The rule is stricter than platformdirs' own (no symlink anywhere on the way, every
    folder above it the user's or root's and writable by no one else unless sticky; the
    folder itself the user's, mode 0700), so where it holds both give the same path; where
    it does not, platformdirs decides. tests/unit/test_locations.py holds the two together.
    """
    if not os.path.isabs(runtime) or os.path.normpath(runtime) != runtime:
        return False
    user = os.geteuid()
    try:
        own = os.lstat(runtime)
        if not stat.S_ISDIR(own.st_mode) or own.st_uid != user or own.st_mode & 0o777 != 0o700:
            return False
        folder = runtime
        while (above := os.path.dirname(folder)) != folder:  # up to "/" (or "//")
            folder = above
            info = os.lstat(folder)
            shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if (
                not stat.S_ISDIR(info.st_mode)
                or info.st_uid not in (0, user)
                or (shared and not info.st_mode & stat.S_ISVTX)
            ):
                return False
    except OSError:
        return False
    return True


def program_folders() -> list[str]:
    """Where this installation's programs (console scripts) may be, most likely first.

    Beside the running Python (a venv, pipx, a system package), in its scripts folder,
    in the user's (pip --user). The daemon admits a native host only from these; the
    CLI writes the first that holds one into the browsers' manifests.
    """
    import sysconfig

    folders = [os.path.dirname(sys.executable), sysconfig.get_path("scripts")]
    if f"{os.name}_user" in sysconfig.get_scheme_names():
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    return list(dict.fromkeys(folder for folder in folders if os.path.isabs(folder)))


def runtime_folder() -> str | None:
    """The broker's folder in the user's runtime folder ($XDG_RUNTIME_DIR/signin-broker).

    None without an absolute XDG_RUNTIME_DIR: platformdirs' fallbacks may be on the same
    disk as the state, which is no other place for it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    return os.path.join(runtime, APP_NAME) if os.path.isabs(runtime) else None


def default_config_path() -> str:
    """The TOML file the daemon reads when no --config is given."""
    import platformdirs

    return os.path.join(platformdirs.user_config_dir(APP_NAME), CONFIG_NAME)


def default_app_policy_path() -> str:
    """The daemon's per-app policy file, beside its config file."""
    import platformdirs

    return os.path.join(platformdirs.user_config_dir(APP_NAME), APP_POLICY_NAME)


def default_state_dir() -> str:
    """The folder for the daemon's persistent state."""
    import platformdirs

    return platformdirs.user_state_dir(APP_NAME)
