"""The config file's token files and service accounts, read and checked before the daemon starts.

And what a token file holds in each format, read back as its readers read it (a shell
sourcing the env file included, whatever printable characters the token has).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from signin_broker.daemon.settings import Settings, SettingsError, load
from signin_broker.store.token_files import render
from support.token_files import held


def settings_of(tmp_path: Path, text: str, *argv: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(text)
    return load(["--config", str(config), *argv], environ={})


def test_token_file_tables_are_read_in_order_with_their_defaults(tmp_path: Path) -> None:
    settings = settings_of(
        tmp_path,
        "[token_files.metrics]\n"
        'path = "~/tokens/metrics"\n'
        'account = "alice@example.com"\n'
        'scopes = ["read"]\n'
        'audience = "https://metrics.example.com/"\n'
        'format = "header"\n'
        "[token_files.plain]\n"
        'path = "/run/user/1000/tokens/plain"\n',
    )
    metrics, plain = settings.token_files
    assert metrics.path == Path("~/tokens/metrics").expanduser() and metrics.app == "file:metrics"
    assert (metrics.account, metrics.scopes, metrics.format) == (
        "alice@example.com",
        ("read",),
        "header",
    )
    assert metrics.audience == "https://metrics.example.com/"
    assert (plain.account, plain.scopes, plain.audience, plain.format) == ("", (), "", "token")
    assert plain.source == f"from {tmp_path / 'config.toml'}"


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('[token_files.Metrics]\npath = "/t/m"\n', "a token file's name is 1 to 32"),
        ("[token_files.m]\n", "path must be the absolute path of a file"),
        ('[token_files.m]\npath = "tokens/m"\n', "path must be the absolute path of a file"),
        (
            '[token_files.m]\npath = "/t/m"\nformat = "yaml"\n',
            "format must be one of token, header",
        ),
        ('[token_files.m]\npath = "/t/m"\naudience = "api"\n', "absolute URI"),
        ('[token_files.m]\npath = "/t/m"\naccount = "user:"\n', "account must be empty"),
        ('[token_files.m]\npath = "/t/m"\nscopes = [1]\n', "scopes must be a list of scopes"),
        ('[token_files.m]\npath = "/t/m"\nmode = "0644"\n', "unknown settings mode"),
        ('[token_files.a]\npath = "/t/x"\n[token_files.b]\npath = "/t/x"\n', "same path /t/x"),
        ('token_files = "/t/x"\n', "must be tables"),
    ],
)
def test_a_wrong_token_file_table_stops_the_daemon_saying_where_and_why(
    tmp_path: Path, table: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=says.replace("(", r"\(")):
        settings_of(tmp_path, table)


def test_a_service_account_asks_for_its_scopes_alone_a_person_for_openid_too(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("kiosk-secret")
    secret.chmod(0o600)
    settings = settings_of(
        tmp_path,
        'issuer = "https://idp.example"\nscopes = "read"\n'
        "[providers.kiosk]\n"
        'issuer = "https://idp.example"\ngrant = "client_credentials"\nclient_id = "kiosk"\n'
        f'client_secret_file = "{secret}"\nscopes = "read"\n',
    )
    person, kiosk = settings.providers
    assert (person.service, person.scopes) == (False, ("openid", "profile", "email", "read"))
    assert (kiosk.service, kiosk.scopes) == (True, ("read",))


SERVICE = 'issuer = "https://idp.example"\ngrant = "client_credentials"\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (SERVICE + 'client_auth = "none"\n', "its client must authenticate"),
        (SERVICE + 'device_client_id = "tv"\n', "no person to sign in on a device"),
        ('grant = "password"\n', "must be one of authorization_code, client_credentials"),
    ],
)
def test_a_service_account_that_cannot_work_stops_the_daemon(
    tmp_path: Path, text: str, says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        settings_of(tmp_path, text)


TOKENS = ["plain-Token_0.9~+/=", "with space", "quote'and\"dollar$(id)`id`;|&<>*?[]#!\\"]


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("form", ["token", "json", "env"])
def test_each_format_gives_its_reader_the_token_back(tmp_path: Path, token: str, form: str) -> None:
    path = tmp_path / form
    path.write_bytes(
        render(
            form,
            access_token=token,
            token_type="Bearer",
            expires_at=1,
            scopes=["a"],
            account="user:1",
        )
    )
    if " " not in token:
        assert held(path, form) == token
    if form == "json":
        assert json.loads(path.read_text())["expires_at_unix"] == 1
    if form == "env":  # a shell sources it: the token as it is, nothing run
        sourced = subprocess.run(
            ["sh", "-c", f'. {shlex.quote(str(path))} && printf %s "$SIGNIN_BROKER_TOKEN"'],
            capture_output=True, text=True, check=True, timeout=10,
        )  # fmt: skip
        assert sourced.stdout == token and sourced.stderr == ""


def test_the_header_format_is_one_line_whatever_the_token() -> None:
    for token in TOKENS:
        text = render(
            "header", access_token=token, token_type="Bearer", expires_at=1, scopes=[], account=""
        )
        assert text.decode() == f"Authorization: Bearer {token}\n"
