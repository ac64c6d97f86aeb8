"""Several providers in one config file, each checked like the main one."""

from __future__ import annotations

from pathlib import Path

import pytest

from signin_broker.daemon.settings import SettingsError, load
from signin_broker.oidc.credentials import secret_name
from signin_broker.session.accounts.records import account_id_of, provider_of
from signin_broker.store.tenants import MissingTenantKey, tenant_key


def settings_of(tmp_path: Path, text: str, *argv: str):
    config = tmp_path / "config.toml"
    config.write_text(text)
    return load(["--config", str(config), *argv], environ={})


def test_provider_tables_come_beside_the_main_provider_which_is_the_default(
    tmp_path: Path,
) -> None:
    settings = settings_of(
        tmp_path,
        'issuer = "https://idp.example"\n'
        "[providers.work]\n"
        'issuer = "https://login.work.example/tenant/v2.0/"\n'
        'client_id = "work-app"\n'
        'device_client_id = "work-tv"\n'
        'scopes = "offline_access"\n'
        'authorize_params = { prompt = "select_account" }\n'
        "[providers.home-2]\n"
        'issuer = "https://home.example"\n',
    )
    main, work, home = settings.providers
    assert (main.alias, main.issuer, main.client_id) == ("", "https://idp.example", "signin-broker")
    assert work.issuer == "https://login.work.example/tenant/v2.0/"  # exactly as stated
    assert (work.client_id, work.device_client_id) == ("work-app", "work-tv")
    assert work.scopes == ("openid", "profile", "email", "offline_access")
    assert work.authorize_params == {"prompt": "select_account"}
    assert (home.alias, home.client_id) == ("home-2", "signin-broker")
    assert settings.default_alias == ""


def test_default_provider_names_a_table_or_main(tmp_path: Path) -> None:
    text = 'issuer = "https://idp.example"\n[providers.work]\nissuer = "https://work.example"\n'
    assert settings_of(tmp_path, text, "--default-provider", "work").default_alias == "work"
    assert settings_of(tmp_path, text, "--default-provider", "main").default_alias == ""
    only_tables = '[providers.work]\nissuer = "https://work.example"\n'
    assert settings_of(tmp_path, only_tables).default_alias == "work"  # the first table
    with pytest.raises(SettingsError, match="default_provider 'home' names no configured"):
        settings_of(tmp_path, text, "--default-provider", "home")


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('[providers.Work]\nissuer = "https://w.example"\n', "an alias is 1 to 32 lower-case"),
        ('[providers.main]\nissuer = "https://w.example"\n', "not 'main'"),
        ('[providers."a/b"]\nissuer = "https://w.example"\n', "an alias is"),
        ("[providers.work]\n", r"\[providers.work\] .* needs issuer"),
        (
            '[providers.work]\nissuer = "https://w.example"\nsocket = "/tmp/x"\n',
            "unknown settings socket",
        ),
        ('[providers.work]\nissuer = "http://w.example"\n', "issuer .* must be an https:// URL"),
        (
            '[providers.work]\nissuer = "https://w.example"\nclient_auth = "private_key_jwt"\n',
            "client_auth of provider work is private_key_jwt",
        ),
        ('providers = "work"\n', "must be tables"),
        ('[providers]\nwork = "https://w.example"\n', "must be a table of provider settings"),
    ],
)
def test_a_provider_table_that_cannot_work_is_refused_by_name(
    tmp_path: Path, table: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        settings_of(tmp_path, table)


def test_account_ids_carry_the_alias_of_a_provider_other_than_the_main_one() -> None:
    assert account_id_of("1001") == "user:1001"
    assert account_id_of("1001", "7", "work") == "work/user:1001:workspace:7"
    assert provider_of("work/user:1001:workspace:7") == "work"
    assert provider_of("user:a/b") == ""  # a sub with a slash is still the main provider's
    assert tenant_key("work/user:1001") == "work/user:1001"
    for malformed in ("work/", "/user:1", "Work/user:1", "a/b/user:1", "work/user:1:x"):
        with pytest.raises(MissingTenantKey):
            tenant_key(malformed)


def test_client_secrets_of_the_same_client_id_at_two_providers_do_not_collide() -> None:
    assert secret_name("signin-broker") == "client:signin-broker:secret"
    assert secret_name("signin-broker", "work") == "client:work/signin-broker:secret"


def test_dpop_is_a_setting_of_each_provider(tmp_path: Path) -> None:
    text = (
        'issuer = "https://idp.example"\ndpop = "require"\n'
        '[providers.work]\nissuer = "https://work.example"\ndpop = "off"\n'
        '[providers.home]\nissuer = "https://home.example"\n'
        '[providers.old]\nissuer = "https://old.example"\ndpop = "auto"\n'
    )
    main, work, home, old = settings_of(tmp_path, text).providers
    # None set: Bearer unless the provider requires DPoP; what a config says keeps its meaning
    assert (main.dpop, work.dpop, home.dpop, old.dpop) == ("require", "off", "if-required", "auto")
    flagged = load(["--issuer", "https://idp.example", "--dpop", "OFF"], environ={})
    assert flagged.main.dpop == "off"
    from_env = load(["--issuer", "https://idp.example"], environ={"SIGNIN_BROKER_DPOP": "require"})
    assert from_env.main.dpop == "require"
    modes = "must be one of if-required, auto, require, off"
    with pytest.raises(SettingsError, match=r"dpop \(\[providers.work\].*" + modes):
        settings_of(tmp_path, '[providers.work]\nissuer = "https://w.example"\ndpop = "on"\n')
