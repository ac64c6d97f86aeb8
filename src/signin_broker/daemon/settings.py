"""The daemon's settings, from flags, environment and a TOML file, in that order of precedence.

Each setting is declared once in options.OPTIONS. The provider settings (issuer,
client_id, ...) describe the main provider. More providers are tables of the config
file, `[providers.<alias>]`, each with the same provider keys; their accounts are
`<alias>/user:<sub>`, and `default_provider` says where a sign-in that names none goes.
A provider whose `grant` is client_credentials has one account, the client itself (a
service account). Token files are tables too, `[token_files.<name>]`
(token_file_setting.py).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import locations
from .._version import __version__
from ..identities import MAIN_ALIAS, MAIN_NAME, PROVIDER_ALIAS, alias_named, name_of
from ..oidc import client_auth, credentials
from .config_files import ConfigError, ConfigValues, read_all, system_files
from .options import (
    CLIENT_CREDENTIALS,
    ENV_PREFIX,
    OPTIONS,
    PROVIDER_KEYS,
    PROVIDERS_TABLE,
    REQUIRED_SCOPES,
    HttpAddress,
    Option,
    env_name,
)
from .token_file_setting import TokenFileSetting, parse_token_files

DEFAULT_SOURCE = "default"  # a setting no flag, variable or file set
TEST_ENV_PREFIX = ENV_PREFIX + "TEST_"  # the test suite's own variables
# The product's variables that are no daemon setting: the daemon knows them and says
# nothing of them (any other SIGNIN_BROKER_* it warns of, as a misspelling).
OTHER_VARIABLES = frozenset(
    {
        ENV_PREFIX + "CONFIG",  # the daemon's --config
        ENV_PREFIX + "TOKEN",  # where `exec` and `token --format env` put a token
        ENV_PREFIX + "TOKEN_TYPE",  # and `exec` its type: Bearer, or DPoP (a proof per request)
        ENV_PREFIX + "BROWSER",  # the browser `signin-broker login` opens
        ENV_PREFIX + "CONFORMANCE_ADMIN_TOKEN",  # the conformance runner's provider admin
        locations.AUTOSTARTED_ENV,  # a client started the daemon (autostart)
        locations.AUTOSTART_ENV,  # whether clients start the daemon
        ENV_PREFIX + "TRY_ISSUER",  # `signin-broker try`'s stub provider, in its shell
    }
)


class SettingsError(Exception):
    """A setting is missing or wrong; the message names it and says what is expected."""


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """One identity provider's settings: the main one's, or a `[providers.<alias>]` table's."""

    alias: str  # "" for the main provider
    issuer: str
    grant: str  # options.PERSON_GRANT, or CLIENT_CREDENTIALS: its one account is the client
    client_id: str
    device_client_id: str  # "" when device sign-ins use client_id
    client_auth: str  # auto or one of client_auth.METHODS
    client_secret_file: Path | None
    client_private_key_file: Path | None
    client_certificate_file: Path | None
    client_key_id: str
    client_assertion_audience: str
    scopes: tuple[str, ...]
    authorize_params: dict[str, str]
    dpop: str  # if-required, auto, require or off (oidc.dpop.MODES)
    # Where each setting that is not a default came from: "from /etc/xdg/...", "from
    # --issuer", "from SIGNIN_BROKER_ISSUER"; status and the start-up log show it.
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def service(self) -> bool:
        """Whether its account is a service account: the client itself, with no person."""
        return self.grant == CLIENT_CREDENTIALS


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the daemon is told, checked; each provider's settings held once."""

    main: ProviderSettings  # the top-level provider settings (issuer "": none configured)
    named: tuple[ProviderSettings, ...]  # the `[providers.<alias>]` tables, in file order
    default_provider: str  # an alias, MAIN_NAME, or "" (the main one, else the first)
    socket: Path
    http: HttpAddress
    state_dir: Path
    revalidate_seconds: int
    key_store: str
    app_policy: Path
    new_apps: str
    ask_timeout_seconds: int
    step_up_timeout_seconds: int
    idle_exit_seconds: int | None  # None: the default of the start mode (idle_exit.py)
    audit_retention_days: int
    audit_keep_days: int
    log_level: str
    browsers: tuple[tuple[str, str], ...]  # more browsers' (name, executable) pairs
    config_file: Path | None  # the user's file that was read, if any
    managed_files: tuple[Path, ...] = ()  # the organisation's files that were read
    managed_leading_nowhere: tuple[Path, ...] = ()  # its symlinks in config.d to nothing
    token_files: tuple[TokenFileSetting, ...] = ()  # the `[token_files.<name>]` tables

    @property
    def providers(self) -> tuple[ProviderSettings, ...]:
        """Every configured provider, the main one first."""
        return ((self.main,) if self.main.issuer else ()) + self.named

    @property
    def default_alias(self) -> str:
        """The alias of the provider a sign-in that names none goes to."""
        if self.default_provider:
            return alias_named(self.default_provider)
        return self.providers[0].alias if self.providers else MAIN_ALIAS


def argument_parser() -> argparse.ArgumentParser:
    """The daemon's command line: one flag per setting plus --config and --version."""
    parser = argparse.ArgumentParser(
        prog="signin-brokerd",
        description="Run the signin-broker daemon in the foreground.",
        epilog=f"Each setting can also be given as an environment variable ({ENV_PREFIX}<NAME>)"
        " or as a key of the TOML config file. Flags win over the environment, which wins"
        " over the file, which wins over an organisation's managed defaults:"
        " signin-broker/config.toml, then signin-broker/config.d/*.toml in name order, in"
        " each folder of $XDG_CONFIG_DIRS (default /etc/xdg; the first one named wins). A"
        f" {ENV_PREFIX}* variable that is no setting is named in a warning at start.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML config file (default: {env_name('config')} or the user config folder)",
    )
    for option in OPTIONS:
        parser.add_argument(
            "--" + option.name.replace("_", "-"),
            dest=option.name,
            default=argparse.SUPPRESS,
            metavar=option.metavar,
            help=option.help,
        )
    return parser


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Parse flags, read the environment and the config file, and check every value."""
    environ = os.environ if environ is None else environ
    flags = vars(argument_parser().parse_args(argv))
    managed = system_files(environ)
    try:
        files = read_all(managed, *_user_file(flags.pop("config", None), environ))
    except ConfigError as error:
        raise SettingsError(str(error)) from None
    values: dict[str, Any] = {}
    main_sources = {}
    for option in OPTIONS:
        raw, source = _pick(option, flags, environ, files)
        try:
            values[option.name] = option.parse(raw)
        except ValueError as error:
            raise SettingsError(f"{option.name} ({source}) {error}") from None
        if option.name in PROVIDER_KEYS and source != DEFAULT_SOURCE:
            main_sources[option.name] = source
    main = _provider(MAIN_ALIAS, {key: values.pop(key) for key in PROVIDER_KEYS}, main_sources)
    named = _provider_tables(files)
    for provider in (main, *named):  # the top-level ones even before issuer is set
        _check_client_auth(provider)
        _check_grant(provider)
    try:
        token_files = parse_token_files(files.token_files, files.token_file_files)
    except ValueError as error:
        raise SettingsError(str(error)) from None
    settings = Settings(
        main,
        tuple(named),
        config_file=files.user_file,
        managed_files=tuple(files.managed),
        managed_leading_nowhere=tuple(files.leading_nowhere),
        token_files=token_files,
        **values,
    )
    providers = settings.providers
    if settings.default_provider and settings.default_alias not in {p.alias for p in providers}:
        raise SettingsError(
            f"default_provider {settings.default_provider!r} names no configured provider"
            f" (configured: {', '.join(name_of(p.alias) for p in providers) or 'none'})"
        )
    return settings


def _provider_tables(files: ConfigValues) -> list[ProviderSettings]:
    """The `[providers.<alias>]` tables of the config files, each checked like the main one."""
    options = {option.name: option for option in OPTIONS if option.name in PROVIDER_KEYS}
    providers = []
    for alias, table in files.providers.items():
        where = f"[{PROVIDERS_TABLE}.{alias}] in {', '.join(map(str, files.provider_files[alias]))}"
        if not PROVIDER_ALIAS.fullmatch(alias) or alias == MAIN_NAME:
            raise SettingsError(
                f"{where}: an alias is 1 to 32 lower-case letters, digits, - or _,"
                f" starting with a letter or digit, and not {MAIN_NAME!r} (the top-level one)"
            )
        if not table.get("issuer"):
            raise SettingsError(f"{where} needs issuer")
        values = {}
        for name, option in options.items():
            try:
                values[name] = option.parse(table.get(name, option.default()))
            except ValueError as error:
                raise SettingsError(f"{name} ({where}) {error}") from None
        from_files = {key: f"from {path}" for key, path in files.provider_sources[alias].items()}
        providers.append(_provider(alias, values, from_files))
    return providers


def _provider(alias: str, values: dict[str, Any], sources: dict[str, str]) -> ProviderSettings:
    """One provider's settings; a person's sign-in asks for REQUIRED_SCOPES beside those listed."""
    if values["grant"] != CLIENT_CREDENTIALS:
        values = {**values, "scopes": tuple(dict.fromkeys((*REQUIRED_SCOPES, *values["scopes"])))}
    return ProviderSettings(alias, **values, sources=sources)


def _check_grant(provider: ProviderSettings) -> None:
    """A service account's client must prove itself, and has no person to sign in on a device."""
    if not provider.service:
        return
    where = f" of provider {provider.alias}" if provider.alias else ""
    if provider.client_auth == client_auth.NONE:
        raise SettingsError(
            f"grant{where} is {CLIENT_CREDENTIALS}: its client must authenticate, so client_auth"
            " cannot be none; set client_secret_file or client_private_key_file, or store its"
            " secret with `signin-broker client-secret set`"
        )
    if provider.device_client_id:
        raise SettingsError(
            f"grant{where} is {CLIENT_CREDENTIALS}: a service account has no person to sign in"
            " on a device; remove device_client_id"
        )


def _check_client_auth(provider: ProviderSettings) -> None:
    """The client authentication settings must agree (the keyring is asked only later)."""
    where = f" of provider {provider.alias}" if provider.alias else ""
    method, key = provider.client_auth, provider.client_private_key_file
    if method == client_auth.PRIVATE_KEY_JWT and key is None:
        raise SettingsError(
            f"client_auth{where} is private_key_jwt: set client_private_key_file too"
        )
    if method == client_auth.NONE and (key or provider.client_secret_file):
        raise SettingsError(
            f"client_auth{where} is none (a public client), yet a client secret or key file"
            " is set; remove it, or choose the method that uses it"
        )
    if provider.client_certificate_file is not None:
        try:
            credentials.certificate_headers(
                provider.client_certificate_file,
                credentials.read_private_key(key) if key is not None else None,
            )
        except client_auth.ClientAuthError as error:
            raise SettingsError(f"{error}{where}") from None


def _pick(
    option: Option,
    flags: Mapping[str, object],
    environ: Mapping[str, str],
    files: ConfigValues,
) -> tuple[object, str]:
    if option.name in flags:
        return flags[option.name], "from --" + option.name.replace("_", "-")
    if env_name(option.name) in environ:
        return environ[env_name(option.name)], "from " + env_name(option.name)
    if option.name in files.values:
        return files.values[option.name], f"from {files.sources[option.name]}"
    return option.default(), DEFAULT_SOURCE


def _user_file(explicit: Path | None, environ: Mapping[str, str]) -> tuple[Path, bool]:
    """The user's config file, and whether it must exist (it was named)."""
    named = explicit or (
        Path(environ[env_name("config")]) if env_name("config") in environ else None
    )
    return named or Path(locations.default_config_path()), named is not None


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each SIGNIN_BROKER_* variable that is no setting, with the setting's nearest to it.

    A misspelt file key stops the daemon; a misspelt variable would be ignored without
    a word, so it is named at start instead ("" when no setting is near it).
    """
    settings = {option.name.upper(): env_name(option.name) for option in OPTIONS}
    known = set(settings.values()) | OTHER_VARIABLES
    unknown = [
        name
        for name in sorted(environ)
        if name.startswith(ENV_PREFIX)
        and name not in known
        and not name.startswith(TEST_ENV_PREFIX)
    ]
    return [(name, _nearest(name.removeprefix(ENV_PREFIX), settings)) for name in unknown]


def _nearest(suffix: str, settings: Mapping[str, str]) -> str:
    """The variable of the setting whose name is nearest (the shared prefix not counted)."""
    import difflib  # only for a variable that is no setting: 0.15 MB otherwise held

    near = difflib.get_close_matches(suffix, list(settings), n=1, cutoff=0.6)
    return settings[near[0]] if near else ""
