"""Settings: one declaration, three spellings, flags over environment over file over default."""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.daemon.options import OPTIONS, HttpAddress, env_name
from signin_broker.daemon.settings import SettingsError, load


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    return path


def load_with(config: Path, argv: list[str] | None = None, **env: str):
    return load(argv or [], {"SIGNIN_BROKER_CONFIG": str(config), **env})


def test_defaults_follow_the_design(config: Path) -> None:
    settings = load_with(config)
    assert settings.main.issuer == ""
    assert settings.main.client_id == "signin-broker"
    assert settings.main.scopes == ("openid", "profile", "email")
    assert settings.http == HttpAddress("127.0.0.1", 8765)
    assert settings.revalidate_seconds == 60  # the contract's bound: one check a minute
    assert settings.socket.name == "broker.sock"
    assert settings.socket.parent.name == "signin-broker"
    assert settings.config_file == config


def test_every_setting_has_a_flag_an_env_var_and_a_file_key(config: Path) -> None:
    names = {option.name for option in OPTIONS}
    assert {
        "issuer",
        "client_id",
        "scopes",
        "socket",
        "http",
        "state_dir",
        "revalidate_seconds",
    } <= names
    for option in OPTIONS:
        assert env_name(option.name) == "SIGNIN_BROKER_" + option.name.upper()


def test_precedence_is_flag_then_env_then_file(config: Path) -> None:
    config.write_text(
        'issuer = "https://file.example"\nrevalidate_seconds = 30\nclient_id = "file"\n'
    )
    settings = load_with(
        config,
        ["--issuer", "https://flag.example"],
        SIGNIN_BROKER_ISSUER="https://env.example",
        SIGNIN_BROKER_CLIENT_ID="env",
    )
    assert settings.main.issuer == "https://flag.example"
    assert settings.main.client_id == "env"
    assert settings.revalidate_seconds == 30  # from the file


def test_scopes_always_include_openid_profile_email_once(config: Path) -> None:
    config.write_text('scopes = ["email", "offline_access", "read:user"]\n')
    assert load_with(config).main.scopes == (
        "openid",
        "profile",
        "email",
        "offline_access",
        "read:user",
    )
    assert load_with(config, ["--scopes", "offline_access, openid"]).main.scopes == (
        "openid",
        "profile",
        "email",
        "offline_access",
    )


@pytest.mark.parametrize("value", ["0", "61", "3600", "soon", "-1"])
def test_revalidate_seconds_is_never_above_60(config: Path, value: str) -> None:
    with pytest.raises(SettingsError, match="revalidate_seconds"):
        load_with(config, ["--revalidate-seconds", value])


def test_revalidate_seconds_from_the_file_must_be_a_number(config: Path) -> None:
    config.write_text("revalidate_seconds = true\n")
    with pytest.raises(SettingsError, match=rf"revalidate_seconds \(from {config}\)"):
        load_with(config)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:0", HttpAddress("127.0.0.1", 0)), ("[::1]:9000", HttpAddress("::1", 9000))],
)
def test_http_accepts_loopback_addresses(config: Path, value: str, expected: HttpAddress) -> None:
    assert load_with(config, ["--http", value]).http == expected


@pytest.mark.parametrize(
    "value", ["0.0.0.0:8765", "localhost:8765", "127.0.0.1", "127.0.0.1:99999"]
)
def test_http_refuses_anything_but_a_loopback_ip_and_port(config: Path, value: str) -> None:
    with pytest.raises(SettingsError, match="http"):
        load_with(config, ["--http", value])


@pytest.mark.parametrize(
    "value",
    ["http://idp.example.com", "ftp://idp.example.com", "https://idp.example.com/?x=1", "https://"],
)
def test_issuer_must_be_https_or_loopback_http(config: Path, value: str) -> None:
    with pytest.raises(SettingsError, match="issuer"):
        load_with(config, ["--issuer", value])


def test_issuer_on_loopback_may_use_http(config: Path) -> None:
    assert (
        load_with(config, ["--issuer", "http://127.0.0.1:9000/"]).main.issuer
        == "http://127.0.0.1:9000/"
    )


def test_relative_paths_are_refused(config: Path) -> None:
    with pytest.raises(SettingsError, match="socket .* must be an absolute path"):
        load_with(config, ["--socket", "broker.sock"])


def test_missing_default_config_file_is_fine_but_a_named_one_is_not(tmp_path: Path) -> None:
    assert load([], {"XDG_CONFIG_HOME": str(tmp_path)}).config_file is None
    with pytest.raises(SettingsError, match="does not exist"):
        load(["--config", str(tmp_path / "missing.toml")], {})


def test_invalid_toml_names_the_file(config: Path) -> None:
    config.write_text("issuer = \n")
    with pytest.raises(SettingsError, match=f"config file {config} is not valid TOML"):
        load_with(config)
    config.write_text("scopes = " + "[" * 5000 + "]" * 5000)  # tomllib recurses per level
    with pytest.raises(SettingsError, match=f"config file {config} nests too deeply"):
        load_with(config)


def test_authorize_params_come_as_a_toml_table_or_as_name_value_pairs(config: Path) -> None:
    config.write_text('[authorize_params]\naccess_type = "offline"\nprompt = "consent"\n')
    assert load_with(config).main.authorize_params == {
        "access_type": "offline",
        "prompt": "consent",
    }
    from_env = load_with(config, SIGNIN_BROKER_AUTHORIZE_PARAMS="ui_locales=de+en&acr_values=mfa")
    assert from_env.main.authorize_params == {"ui_locales": "de en", "acr_values": "mfa"}


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ("state=x", "sets state itself"),
        ("redirect_uri=https://evil.example/", "sets redirect_uri itself"),
        ("prompt=sometimes", "prompt must be"),
        ("access_type", "name=value pairs"),
    ],
)
def test_authorize_params_the_daemon_cannot_honour_are_refused(
    config: Path, value: str, complaint: str
) -> None:
    with pytest.raises(SettingsError, match=complaint):
        load_with(config, ["--authorize-params", value])
