"""Every setting the daemon takes, declared once: its name, how its value is checked, its help.

Each exists in three spellings: a flag (`--revalidate-seconds`), an environment
variable (`SIGNIN_BROKER_REVALIDATE_SECONDS`) and a key of the config file
(`revalidate_seconds`). Values are checked here, so the rest of the daemon can
trust them; a check says what is wrong with ValueError.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from .. import locations
from ..identities import MAIN_NAME
from ..oidc import client_auth, credentials, dpop
from ..session.validation import check_authorize_params, check_provider, check_scope
from ..store.keys import KEY_STORES
from . import idle_exit
from .browser_setting import BROWSERS_HELP, parse_browsers

ENV_PREFIX = "SIGNIN_BROKER_"
PROVIDERS_TABLE = "providers"
PROVIDER_KEYS = (
    "issuer",
    "grant",
    "client_id",
    "device_client_id",
    "client_auth",
    "client_secret_file",
    "client_private_key_file",
    "client_certificate_file",
    "client_key_id",
    "client_assertion_audience",
    "scopes",
    "authorize_params",
    "dpop",
)
REQUIRED_SCOPES = ("openid", "profile", "email")  # of a person's sign-in (not a service's)
# How a provider's accounts get their tokens: a person signs in (a browser or a device
# code, then refresh tokens), or the client itself is the account, a service account
# with no person (RFC 6749 4.4: the client credentials grant, asked again before expiry).
PERSON_GRANT = "authorization_code"
CLIENT_CREDENTIALS = "client_credentials"
GRANTS = (PERSON_GRANT, CLIENT_CREDENTIALS)
MAX_REVALIDATE_SECONDS = 60
LOG_LEVELS = ("debug", "info", "warn", "error")
NEW_APP_DECISIONS = ("allow", "ask", "deny")


@dataclass(frozen=True, slots=True)
class HttpAddress:
    """Where the loopback web surface listens (port 0 picks a free port)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _issuer(value: object) -> str:
    text = _text(value)  # exactly as the provider states it: a trailing "/" is part of it
    if not text:
        return ""
    parts = urlsplit(text)
    loopback = parts.hostname is not None and _is_loopback(parts.hostname)
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ValueError("must be an https:// URL (http:// only on a loopback address)")
    if parts.query or parts.fragment or not parts.hostname:
        raise ValueError("must be a plain URL with a host and no query or fragment")
    return text


def _client_id(value: object) -> str:
    text = _text(value)
    if not text or len(text) > 255 or not text.isprintable():
        raise ValueError("must be 1 to 255 printable characters")
    return text


def _device_client_id(value: object) -> str:
    return _client_id(value) if _text(value) else ""


def _default_provider(value: object) -> str:
    return check_provider(_text(value))


def _one_of(choices: tuple[str, ...]) -> Callable[[object], str]:
    """The check of a setting that is one of `choices`, in any case."""

    def parse(value: object) -> str:
        choice = _text(value).lower()
        if choice not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return choice

    return parse


def _secret_file(value: object) -> Path | None:
    """A client secret file: checked now, so an unsafe one stops the daemon before it starts."""
    return _credential_file(value, credentials.read_secret_file, "client_secret_file")


def _private_key_file(value: object) -> Path | None:
    """A client private key file: checked now, like a secret file, and that it is a usable key."""
    return _credential_file(value, credentials.read_private_key, "client_private_key_file")


def _credential_file(value: object, read: Callable[[Path], object], setting: str) -> Path | None:
    """The file read as the daemon will read it; ValueError says why it cannot be."""
    if not _text(value):
        return None
    path = _absolute_path(value)
    try:
        read(path)
    except client_auth.ClientAuthError as error:
        raise ValueError(str(error).removeprefix(f"{setting}: ")) from None
    return path


def _optional_path(value: object) -> Path | None:
    return _absolute_path(value) if _text(value) else None


def _key_id(value: object) -> str:
    text = _text(value)
    if len(text) > 255 or not text.isprintable():
        raise ValueError("must be at most 255 printable characters")
    return text


def _assertion_audience(value: object) -> str:
    audience = _text(value).lower()
    if audience not in client_auth.ASSERTION_AUDIENCES:
        raise ValueError('must be "token_endpoint" (OpenID Connect Core 9) or "issuer"')
    return audience


def _scopes(value: object) -> tuple[str, ...]:
    """The scopes listed (settings.py adds REQUIRED_SCOPES for a person's sign-in)."""
    items = value if isinstance(value, list) else re.split(r"[\s,]+", _text(value))
    scopes: list[str] = []
    for item in items:
        scope = _text(item)
        if scope and check_scope(scope) not in scopes:
            scopes.append(scope)
    return tuple(scopes)


def _absolute_path(value: object) -> Path:
    path = Path(_text(value)).expanduser()
    if not path.is_absolute():
        raise ValueError("must be an absolute path")
    return path


def _http(value: object) -> HttpAddress:
    host, sep, port_text = _text(value).rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError("must be host:port, for example 127.0.0.1:8765")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError("must be a loopback IP address (127.0.0.1 or [::1]): the page is local")
    return HttpAddress(host, int(port_text))


def _whole_number(value: object, unit: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a whole number of {unit}")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"must be a whole number of {unit}") from None
    if not low <= number <= high:
        raise ValueError(f"must be between {low} and {high} {unit}")
    return number


def _revalidate_seconds(value: object) -> int:
    try:
        return _whole_number(value, "seconds", 1, MAX_REVALIDATE_SECONDS)
    except ValueError as error:
        raise ValueError(
            f"{error}: revocation must take effect within {MAX_REVALIDATE_SECONDS} s"
        ) from None


def _idle_exit_seconds(value: object) -> int | None:
    if isinstance(value, str) and not value.strip():
        return None
    return _whole_number(value, "seconds", 0, idle_exit.MAX_SECONDS)


def _key_store(value: object) -> str:
    kind = _text(value).lower()
    if kind not in KEY_STORES:
        stores = ", ".join(map(repr, KEY_STORES))
        raise ValueError(f"must be one of {stores} (a key file is weaker, opt-in)")
    return kind


def _new_apps(value: object) -> str:
    decision = _text(value).lower()
    if decision not in NEW_APP_DECISIONS:
        raise ValueError('must be "allow" (like ssh-agent), "ask" or "deny"')
    return decision


def _ask_timeout_seconds(value: object) -> int:
    return _whole_number(value, "seconds", 1, 3600)


def _step_up_timeout_seconds(value: object) -> int:
    return _whole_number(value, "seconds", 0, 600)  # a begun sign-in lasts 10 minutes


def _audit_days(value: object) -> int:
    return _whole_number(value, "days", 0, 3650)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value.strip()


def _authorize_params(value: object) -> dict[str, str]:
    """A TOML table of extra authorize parameters, or the same as name=value&name=value."""
    if isinstance(value, str):
        pairs = [pair.partition("=") for pair in value.split("&") if pair.strip()]
        if any(not equals for _, equals, _ in pairs):
            raise ValueError("must be name=value pairs joined by &, or a TOML table")
        value = {name.strip(): unquote_plus(text) for name, _, text in pairs}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError('must be a table of text values, e.g. { access_type = "offline" }')
    return check_authorize_params(value)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its name, help, check (raw value in, checked value or ValueError out)."""

    name: str
    help: str
    parse: Callable[[object], Any]
    default: Callable[[], object]
    metavar: str


OPTIONS: tuple[Option, ...] = (
    Option(
        "issuer",
        "the identity provider's issuer URL; endpoints come from its discovery document",
        _issuer,
        lambda: "",
        "URL",
    ),
    Option(
        "grant",
        f"how the provider's accounts get tokens: {PERSON_GRANT} (a person signs in, in a"
        f" browser or with a device code) or {CLIENT_CREDENTIALS} (a service account: the"
        " client itself, with its secret or key and no person, for a kiosk or a build"
        " machine)",
        _one_of(GRANTS),
        lambda: PERSON_GRANT,
        "GRANT",
    ),
    Option(
        "client_id",
        "this broker's client id at the identity provider",
        _client_id,
        lambda: "signin-broker",
        "ID",
    ),
    Option(
        "device_client_id",
        "a second client id for device sign-ins, for a provider whose client registration"
        " allows only one grant type (default: client_id)",
        _device_client_id,
        lambda: "",
        "ID",
    ),
    Option(
        "client_auth",
        "how the client authenticates to the provider: auto (a private key signs, else a"
        " stored secret is sent, else none), none, client_secret_basic, client_secret_post"
        " or private_key_jwt",
        _one_of(client_auth.CHOICES),
        lambda: "auto",
        "METHOD",
    ),
    Option(
        "client_secret_file",
        "a 0600 file holding the client secret (default: the keyring's, stored with"
        " `signin-broker client-secret set`); never put a secret itself in a setting",
        _secret_file,
        lambda: "",
        "PATH",
    ),
    Option(
        "client_private_key_file",
        "a 0600 PEM file with the client's private key (RSA, EC or Ed25519): private_key_jwt",
        _private_key_file,
        lambda: "",
        "PATH",
    ),
    Option(
        "client_certificate_file",
        "the PEM certificate of that key, for providers that find the key by its thumbprint"
        " (Microsoft Entra ID's certificate credentials: x5t and x5t#S256 in each assertion)",
        _optional_path,
        lambda: "",
        "PATH",
    ),
    Option(
        "client_key_id",
        "the kid of that key as registered at the provider, sent in each client assertion",
        _key_id,
        lambda: "",
        "KID",
    ),
    Option(
        "client_assertion_audience",
        'the aud of each client assertion: "token_endpoint" (the default, as OpenID Connect'
        ' Core 9 asks) or "issuer" (as Auth0 asks)',
        _assertion_audience,
        lambda: "token_endpoint",
        "AUD",
    ),
    Option(
        "authorize_params",
        "extra parameters of every browser sign-in's authorize request, such as Google's"
        " access_type=offline or prompt=select_account (name=value&...; a table in TOML)",
        _authorize_params,
        dict,
        "PARAMS",
    ),
    Option(
        "dpop",
        "DPoP (RFC 9449), tokens bound to a key kept here: if-required (Bearer, which every"
        " tool sends, unless the provider requires DPoP of this client), auto (wherever"
        " discovery offers it), require (refuse a provider without it) or off",
        _one_of(dpop.MODES),
        lambda: dpop.IF_REQUIRED,
        "MODE",
    ),
    Option(
        "scopes",
        "scopes to request, space or comma separated; a person's sign-in asks for openid"
        " profile email always, a service account for these alone",
        _scopes,
        lambda: "",
        "SCOPES",
    ),
    Option(
        "default_provider",
        f"where a sign-in that names no provider goes: the alias of a [providers.<alias>]"
        f" table of the config file, or {MAIN_NAME} (default: {MAIN_NAME} when issuer is set,"
        " else the first table)",
        _default_provider,
        lambda: "",
        "ALIAS",
    ),
    Option(
        "socket",
        "the Unix socket to serve on",
        _absolute_path,
        locations.default_socket_path,
        "PATH",
    ),
    Option(
        "http",
        "host:port of the loopback sign-in pages",
        _http,
        lambda: "127.0.0.1:8765",
        "HOST:PORT",
    ),
    Option(
        "state_dir",
        "folder for the daemon's persistent state; it must be yours alone (the daemon"
        " refuses one that other users can write to, or that sits in such a folder)",
        _absolute_path,
        locations.default_state_dir,
        "PATH",
    ),
    Option(
        "revalidate_seconds",
        "within how many seconds a revocation at the provider shows here (1 to 60, by default"
        " 60): the daemon re-checks each session that often, less twice the provider's"
        " measured answer time and a second, and a renewal counts as a check",
        _revalidate_seconds,
        lambda: "60",
        "SECONDS",
    ),
    Option(
        "key_store",
        'where the key of the stored sessions lives: "keyring" (the OS keyring) or "file"'
        " (a 0600 file beside the state; weaker, for machines without a keyring)",
        _key_store,
        lambda: "keyring",
        "KIND",
    ),
    Option(
        "app_policy",
        "the TOML file of per-app decisions (allow, deny, ask); `signin-broker apps` edits it",
        _absolute_path,
        locations.default_app_policy_path,
        "PATH",
    ),
    Option(
        "new_apps",
        'what an app without a decision gets: "allow" (like ssh-agent), "ask" (it waits for'
        ' `signin-broker apps allow|deny`) or "deny"',
        _new_apps,
        lambda: "allow",
        "DECISION",
    ),
    Option(
        "ask_timeout_seconds",
        "how long an app's request waits for the user's answer before PERMISSION_DENIED",
        _ask_timeout_seconds,
        lambda: "60",
        "SECONDS",
    ),
    Option(
        "step_up_timeout_seconds",
        "how long a token request that needs a stronger sign-in (RFC 9470 step-up) waits"
        " for the person to complete it before FAILED_PRECONDITION (0: it does not wait;"
        " the sign-in is begun and the person told all the same)",
        _step_up_timeout_seconds,
        lambda: str(int(locations.STEP_UP_TIMEOUT_SECONDS)),
        "SECONDS",
    ),
    Option(
        "idle_exit_seconds",
        "exit after this many seconds without work of its own (no app connected, no"
        " sign-in, step-up, renewal, watcher or forward under way); the next call starts"
        " it again (0: never). Unset: "
        + ", ".join(
            f"{s} s when started by {mode}" for mode, s in idle_exit.DEFAULT_SECONDS.items()
        )
        + ", else never",
        _idle_exit_seconds,
        lambda: "",
        "SECONDS",
    ),
    Option(
        "audit_retention_days",
        "how long the audit rows of a removed account are kept (0: removed at once)",
        _audit_days,
        lambda: "30",
        "DAYS",
    ),
    Option(
        "audit_keep_days",
        "how long any audit row is kept",
        _audit_days,
        lambda: "365",
        "DAYS",
    ),
    Option("browsers", BROWSERS_HELP, parse_browsers, lambda: "", "NAME=PATH,..."),
    Option("log_level", "debug, info, warn or error", _one_of(LOG_LEVELS), lambda: "info", "LEVEL"),
)


def env_name(option_name: str) -> str:
    """The environment variable of a setting."""
    return ENV_PREFIX + option_name.upper()
