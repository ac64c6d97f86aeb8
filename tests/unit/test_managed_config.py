"""Managed defaults: an organisation's files below the user's own, each value's file named.

The system config folders ($XDG_CONFIG_DIRS) hold signin-broker/config.toml and
signin-broker/config.d/*.toml; the user's file, the environment and flags win over them.
A managed file another user could change is refused: it could send the sign-in elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signin_broker.daemon.settings import SettingsError, load, unknown_variables


def managed(folder: Path, name: str, text: str) -> Path:
    path = folder / "signin-broker" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def system(tmp_path: Path) -> tuple[Path, Path]:
    """Two system config folders: the first named wins over the second."""
    first, second = tmp_path / "vendor-first", tmp_path / "xdg"
    for folder in (first, second):
        folder.mkdir(mode=0o755)
    return first, second


def load_with(system: tuple[Path, Path], user: Path, argv: list[str] | None = None, **env: str):
    folders = ":".join(map(str, system))
    return load(argv or [], {"XDG_CONFIG_DIRS": folders, "SIGNIN_BROKER_CONFIG": str(user), **env})


def test_managed_files_lie_below_the_users_file_the_environment_and_flags(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = system
    base = managed(second, "config.toml", 'issuer = "https://base.example"\nclient_id = "base"\n'
                   'revalidate_seconds = 10\nscopes = "base"\nlog_level = "debug"\n')  # fmt: skip
    later = managed(second, "config.d/20-team.toml", 'client_id = "team"\nscopes = "team"\n')
    managed(second, "config.d/10-org.toml", 'client_id = "org"\nrevalidate_seconds = 20\n')
    ours = managed(first, "config.d/05-site.toml", 'scopes = "site"\nlog_level = "warn"\n')
    user = tmp_path / "user.toml"
    user.write_text('log_level = "error"\n')
    settings = load_with(system, user, ["--revalidate-seconds", "40"])
    assert settings.main.issuer == "https://base.example"
    assert settings.main.client_id == "team"  # 20- after 10-, in name order
    assert settings.main.scopes[-1] == "site"  # the first folder named wins
    assert settings.revalidate_seconds == 40  # the flag
    assert settings.log_level == "error"  # the user's file
    assert settings.main.sources == {
        "issuer": f"from {base}",
        "client_id": f"from {later}",
        "scopes": f"from {ours}",
    }
    assert settings.managed_files[-1] == ours
    environment = load_with(system, user, SIGNIN_BROKER_CLIENT_ID="env")
    assert environment.main.client_id == "env"
    assert environment.main.sources["client_id"] == "from SIGNIN_BROKER_CLIENT_ID"


def test_a_providers_table_is_merged_key_by_key_and_each_key_names_its_file(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    table = '[providers.work]\nissuer = "https://work.example"\nclient_id = "org"\n'
    org = managed(system[1], "config.d/10-org.toml", table)
    user = tmp_path / "user.toml"
    user.write_text(
        '[providers.work]\nclient_id = "mine"\n[providers.home]\nissuer = "https://home.example"\n'
    )
    work, home = load_with(system, user).named
    assert (work.issuer, work.client_id) == ("https://work.example", "mine")
    assert work.sources == {"issuer": f"from {org}", "client_id": f"from {user}"}
    assert home.sources == {"issuer": f"from {user}"}


@pytest.mark.parametrize("unsafe", ["file", "folder"])
def test_a_managed_file_another_user_could_change_stops_the_daemon(
    system: tuple[Path, Path], tmp_path: Path, unsafe: str
) -> None:
    path = managed(system[1], "config.d/10-org.toml", 'issuer = "https://org.example"\n')
    (path if unsafe == "file" else path.parent).chmod(0o666 if unsafe == "file" else 0o777)
    with pytest.raises(SettingsError, match="could be changed by another user") as refused:
        load_with(system, tmp_path / "none.toml")
    assert "chmod go-w" in str(refused.value)


def test_a_managed_file_of_another_owner_is_refused(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    path = managed(system[1], "config.toml", 'issuer = "https://org.example"\n')
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")  # CI runs as root
    os.chown(path, 4242, 4242)
    with pytest.raises(SettingsError, match="owned by uid 4242"):
        load_with(system, tmp_path / "none.toml")


def test_a_managed_files_unknown_key_is_refused_by_name(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    path = managed(system[1], "config.d/10-org.toml", 'isuer = "https://org.example"\n')
    with pytest.raises(SettingsError, match=f"config file {path} has unknown settings isuer"):
        load_with(system, tmp_path / "none.toml")


def test_without_managed_files_nothing_changes(system: tuple[Path, Path], tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text('issuer = "https://mine.example"\n')
    settings = load_with(system, user)
    assert settings.managed_files == ()
    assert settings.main.sources == {"issuer": f"from {user}"}


def test_a_misspelt_environment_variable_is_named_with_the_nearest_setting() -> None:
    environ = {
        "SIGNIN_BROKER_ISUER": "https://id.example",
        "SIGNIN_BROKER_CLIENT_SECRET": "never-a-setting",
        "SIGNIN_BROKER_WHATEVER": "1",
        "SIGNIN_BROKER_ISSUER": "https://id.example",  # a setting
        "SIGNIN_BROKER_BROWSER": "firefox",  # the CLI's
        "SIGNIN_BROKER_TEST_KILLS": "5",  # the test suite's
        "HOME": "/home/alice",
    }
    assert unknown_variables(environ) == [
        ("SIGNIN_BROKER_CLIENT_SECRET", "SIGNIN_BROKER_CLIENT_SECRET_FILE"),
        ("SIGNIN_BROKER_ISUER", "SIGNIN_BROKER_ISSUER"),
        ("SIGNIN_BROKER_WHATEVER", ""),
    ]


def test_every_variable_the_product_reads_is_known_to_the_warning() -> None:
    """A new SIGNIN_BROKER_* variable in the code must be a setting or declared, or it warns."""
    import re

    source = Path(__file__).parents[2] / "src" / "signin_broker"
    named = {
        name
        for path in source.rglob("*.py")
        for name in re.findall(r"SIGNIN_BROKER_[A-Z_]+[A-Z]", path.read_text())
    }
    assert named, "no variable found: the pattern is wrong"
    assert unknown_variables(dict.fromkeys(named, "")) == []


def test_a_provider_table_without_an_issuer_names_every_file_that_holds_it(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    org = managed(system[1], "config.d/10-org.toml", "[providers.work]\n")
    user = tmp_path / "user.toml"
    user.write_text('[providers.work]\nclient_id = "mine"\n')
    with pytest.raises(SettingsError) as refused:
        load_with(system, user)
    assert str(refused.value) == f"[providers.work] in {org}, {user} needs issuer"


def redirected(system: tuple[Path, Path], target: Path) -> Path:
    """config.d/10-org.toml as a symlink to `target` (a root-owned file, as the attack had)."""
    link = system[1] / "signin-broker" / "config.d" / "10-org.toml"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def others_folder(tmp_path: Path, how: str) -> Path:
    """A folder another user can change things in: theirs, or writable by all."""
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    if how == "owned":
        if os.geteuid() != 0:
            pytest.skip("only root can give a folder to another user")  # CI runs as root
        os.chown(folder, 4242, 4242)
    else:
        folder.chmod(0o777)
    return folder


@pytest.mark.parametrize("how", ["owned", "writable"])
@pytest.mark.parametrize("there", [True, False])
def test_a_managed_symlink_through_a_folder_another_user_can_change_stops_the_daemon(
    system: tuple[Path, Path], tmp_path: Path, how: str, there: bool
) -> None:
    """Another user could swap the file it leads to, or delete it, at will: the daemon stops."""
    folder = others_folder(tmp_path, how)
    target = folder / "org.toml"
    if there:
        target.write_text('issuer = "https://org.example"\n')
    link = redirected(system, target)
    with pytest.raises(SettingsError, match="could be changed by another user") as refused:
        load_with(system, tmp_path / "none.toml")
    said = str(refused.value)
    assert f"managed config {link}" in said and f"folder {folder} (on the way to" in said
    assert f"chmod go-w {folder}" in said


def test_every_symlink_on_the_way_is_followed_and_its_folders_checked(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o755)
    folder = others_folder(tmp_path, "writable")
    (folder / "org.toml").write_text('issuer = "https://org.example"\n')
    (safe / "hop").symlink_to(Path("..") / "theirs" / "org.toml")  # relative, then on
    redirected(system, safe / "hop")
    with pytest.raises(SettingsError, match=f"folder {folder} \\(on the way to"):
        load_with(system, tmp_path / "none.toml")


def test_a_managed_symlink_through_safe_folders_is_read_and_one_to_nothing_reported(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    safe = tmp_path / "safe"  # under /tmp, which others may write: its sticky bit protects
    safe.mkdir(mode=0o755)
    (safe / "org.toml").write_text('issuer = "https://org.example"\n')
    link = redirected(system, safe / "org.toml")
    user = tmp_path / "user.toml"
    user.write_text("")
    settings = load_with(system, user)
    assert settings.main.issuer == "https://org.example"
    assert settings.managed_files == (link,)
    (safe / "org.toml").unlink()
    settings = load_with(system, user)
    assert (settings.managed_files, settings.managed_leading_nowhere) == ((), (link,))


def test_a_managed_symlink_to_a_fifo_is_refused_not_waited_on(
    system: tuple[Path, Path], tmp_path: Path
) -> None:
    safe = tmp_path / "safe"
    safe.mkdir(mode=0o755)
    os.mkfifo(safe / "org.toml")
    redirected(system, safe / "org.toml")
    with pytest.raises(SettingsError, match="is not a regular file"):
        load_with(system, tmp_path / "none.toml")
