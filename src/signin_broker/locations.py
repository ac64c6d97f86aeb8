"""Where the broker's files live: the one place the daemon and its clients agree on paths.

The socket path is decided here for both sides, so an app finds the daemon without
configuration: `SIGNIN_BROKER_SOCKET` when set, otherwise the user's runtime folder
(`$XDG_RUNTIME_DIR/signin-broker/broker.sock` on Linux).
"""

from __future__ import annotations

import os
import warnings

APP_NAME = "signin-broker"
SOCKET_ENV = "SIGNIN_BROKER_SOCKET"
SOCKET_NAME = "broker.sock"
CONFIG_NAME = "config.toml"
APP_POLICY_NAME = "apps.toml"

# sun_path holds 108 bytes on Linux (104 on macOS) including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 103
DEFAULT_TIMEOUT_SECONDS = 10.0  # how long a client waits for the daemon to answer


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
    import platformdirs  # only when needed: it costs the one-shot CLI about 20 ms

    with warnings.catch_warnings():  # its fallback when XDG_RUNTIME_DIR is unset is expected
        warnings.simplefilter("ignore", platformdirs.RuntimeDirWarning)
        return os.path.join(platformdirs.user_runtime_dir(APP_NAME), SOCKET_NAME)


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
