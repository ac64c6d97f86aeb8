"""The daemon's side of `signin-broker doctor`: would a daemon with these settings work.

Run as a process (`python -m signin_broker.daemon.doctor [the daemon's flags]`) by the
CLI, which may not load the daemon: with the running daemon's flags and environment
when one runs, so its settings, keyring and clock are the ones looked at, else with
the caller's. It changes nothing but a probe entry in the key store, which it removes,
and prints one JSON object: the settings (no secret is a setting: secrets live in
files and the keyring, which are named, never read out) and the findings, each a
check, a name, ok/warn/fail, what was seen and what to do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..identities import name_of
from ..oidc.dpop import IF_REQUIRED, DpopKey, offers
from ..oidc.errors import ProviderMisfit, ProviderUnavailable
from ..oidc.provider import CLOCK_NOTICED_SECONDS, Provider
from ..session.providers.dpop_requirements import DpopRequirements, Requirement
from ..store.dpop_requirements import REQUIREMENTS_FILE, RequirementFile
from ..store.files import UnsafeStorage, check_private_folder
from ..store.keys import KeyStoreUnavailable, open_key_store
from ..store.token_files import check_token_folder
from .apps.policy import PolicyFile
from .config_files import managed_problems
from .host.instance import InstanceError, check_socket_folder
from .settings import ProviderSettings, Settings, SettingsError, load, unknown_variables

OK, WARN, FAIL = "ok", "warn", "fail"
KEYRING_SECONDS = 10.0  # a locked keyring may wait for a password prompt nobody answers
LOW_SPACE_BYTES = 50 << 20  # the audit log and state files need a few MB to breathe
PROBE_KEY = "doctor:probe"  # stored, read back and deleted; holds nothing of anyone's
FORGET_DPOP = "--forget-dpop"  # the CLI's option, passed on before the daemon's flags
FORGET_DPOP_ACTION = (
    f"if it no longer does, `signin-broker doctor {FORGET_DPOP}` forgets it now; a sign-in"
    " without a proof that succeeds forgets it too"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One check's outcome, worded for a person: what was seen, and what to do about it."""

    check: str  # socket, provider, clock, keyring, state, policy: the CLI orders by it
    name: str
    status: str  # OK, WARN or FAIL
    seen: str
    action: str = ""


def _said(check: str, name: str, status: str, message: str, fallback: str) -> Finding:
    """A finding from one of the house's "what happened; what to do" messages."""
    seen, _, action = message.partition("; ")
    return Finding(check, name, status, seen, action or fallback)


def socket_folder(settings: Settings) -> Finding:
    """The socket's folder must be the user's alone (0700), the socket 0600."""
    folder, path = settings.socket.parent, settings.socket
    name = "socket folder"
    if not folder.exists():
        return Finding("socket", name, OK, f"{folder} does not exist yet; the daemon makes it 0700")
    try:
        check_socket_folder(folder)
    except InstanceError as error:
        return _said("socket", name, FAIL, str(error), "the daemon refuses to start until fixed")
    try:
        info = path.lstat()
    except FileNotFoundError:
        return Finding("socket", name, OK, f"{folder} is yours alone (0700); no socket in it yet")
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISSOCK(info.st_mode):
        return Finding("socket", name, FAIL, f"{path} is not a socket", f"remove it: rm {path}")
    if mode & 0o077:
        return Finding(
            "socket", name, WARN, f"socket {path} has mode {mode:04o}, not 0600",
            f"run `chmod 600 {path}`; the folder's 0700 keeps others out meanwhile",
        )  # fmt: skip
    return Finding("socket", name, OK, f"{folder} is yours alone (0700), its socket 0600")


async def _provider(provider: ProviderSettings, learned: DpopRequirements) -> list[Finding]:
    """Discovery from the issuer, which also reaches the provider and reads its clock."""
    name = f"provider {name_of(provider.alias)}"
    client = Provider(
        provider.issuer,
        provider.client_id,
        dpop=provider.dpop,
        dpop_required=learned.required(provider.issuer, provider.client_id),
    )
    try:
        metadata = await client.metadata()
        dpop = await _dpop_key(client)
    except ProviderUnavailable as error:
        return [
            _said(
                "provider", name, FAIL, f"{provider.issuer}: {error}",
                "check the network, and that `issuer` is exactly what the provider's discovery"
                " document says (a trailing / too)",
            ),
            Finding(
                "clock", f"clock ({name_of(provider.alias)})", WARN,
                "not compared: the provider did not answer", "run the doctor again once it does",
            ),
        ]  # fmt: skip
    finally:
        await client.close()
    if isinstance(dpop, ProviderMisfit):  # dpop = require, and the provider offers none
        misfit = _said("provider", name, FAIL, str(dpop), "sign-in is refused until fixed")
        return [misfit, _clock(client, provider)]
    requirement = learned.of(client)
    found = Finding(
        "provider", name, OK,
        f"{provider.issuer} answers; token endpoint {metadata.token_endpoint}"
        + ("" if metadata.device_authorization_endpoint else "; it offers no device sign-in")
        + _binding(client, metadata.dpop_signing_algorithms, dpop, requirement),
        FORGET_DPOP_ACTION if requirement else "",
    )  # fmt: skip
    return [found, _clock(client, provider)]


def _binding(
    client: Provider, offered: tuple[str, ...], key: DpopKey | None, learned: Requirement | None
) -> str:
    """How a sign-in's tokens would be sent, and why (the dpop setting, or the provider)."""
    if key is not None and learned is not None:
        return (
            f"; it requires DPoP of client {client.client_id}, as a sign-in learned on"
            f" {_day(learned.learned_at)} ({learned.reason}; kept until {_day(learned.until)}):"
            f" tokens are bound by DPoP ({key.algorithm})"
        )
    if key is not None:
        return f"; dpop = {client.dpop}: tokens are bound by DPoP ({key.algorithm})"
    if offers(offered) and client.dpop == IF_REQUIRED:
        return (
            "; it offers DPoP: tokens stay Bearer unless it shows that it requires DPoP of this"
            ' client (if it requires it without saying so, sign-ins fail: set dpop = "auto")'
        )
    return "; Bearer tokens"


def _day(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(unix))


async def _dpop_key(client: Provider) -> DpopKey | ProviderMisfit | None:
    """What a sign-in would bind its tokens to (the dpop setting), or why it is refused."""
    try:
        return await client.new_dpop_key()
    except ProviderMisfit as misfit:
        return misfit


def _clock(client: Provider, provider: ProviderSettings) -> Finding:
    name = f"clock ({name_of(provider.alias)})"
    if client.clock_offset is None:
        return Finding(
            "clock", name, WARN, "not compared: the provider's answer had no Date header"
        )
    if client.clock_problem:
        return _said("clock", name, FAIL, client.clock_problem, "set the clock right")
    return Finding(
        "clock", name, OK,
        f"within {CLOCK_NOTICED_SECONDS} s of the provider's"
        f" (off by about {abs(client.clock_offset):.0f} s)",
    )  # fmt: skip


async def providers(settings: Settings) -> list[Finding]:
    """Every configured provider at once (each bounded by the provider client's own limits)."""
    if not settings.providers:
        return [
            Finding(
                "provider", "provider", FAIL, "no issuer is configured",
                'set one: `issuer = "https://id.example.com"` in the config file, or --issuer',
            )
        ]  # fmt: skip
    learned = DpopRequirements(RequirementFile(settings.state_dir / REQUIREMENTS_FILE))
    learned.load()  # an unreadable file is read as nothing learned, as the daemon reads it
    checked = await asyncio.gather(*(_provider(p, learned) for p in settings.providers))
    return [finding for pair in checked for finding in pair]


def forget_dpop(settings: Settings) -> Finding:
    """Forget every provider's requirement of DPoP that sign-ins learned (`--forget-dpop`).

    The daemon reads the file again before its next sign-in: that sign-in sends no
    proof unless the provider shows the requirement again. Accounts signed in while it
    was known keep their bound tokens until they sign in again.
    """
    file = RequirementFile(settings.state_dir / REQUIREMENTS_FILE)
    name = "DPoP requirements"
    try:
        forgotten = [f"{kept.issuer} of client {kept.client_id}" for kept in file.load()]
    except (OSError, ValueError):
        forgotten = ["an unreadable file"]
    try:
        file.path.unlink(missing_ok=True)
    except OSError as error:
        return Finding(
            "provider", name, FAIL, f"could not forget them: {error}", f"remove {file.path}"
        )
    if not forgotten:
        return Finding("provider", name, OK, "none was learned: nothing to forget")
    return Finding(
        "provider", name, OK,
        f"forgotten: {'; '.join(forgotten)}; the next sign-in sends no DPoP proof unless the"
        " provider shows again that it requires one (accounts signed in before keep their"
        " DPoP-bound tokens until they sign in again)",
    )  # fmt: skip


def key_store(settings: Settings) -> Finding:
    """Whether a key can be stored and read back where the daemon keeps its keys."""
    outcome: list[Finding] = []
    worker = threading.Thread(target=lambda: outcome.append(_probe(settings)), daemon=True)
    worker.start()
    worker.join(KEYRING_SECONDS)
    if outcome:
        return outcome[0]
    return Finding(
        "keyring", "keyring", FAIL,
        f"the keyring did not answer within {KEYRING_SECONDS:g} s (locked, and waiting for a"
        " password prompt?)",
        "unlock it (log in to the desktop, or `gnome-keyring-daemon --unlock`), or set"
        ' key_store = "file"',
    )  # fmt: skip


def _probe(settings: Settings) -> Finding:
    try:
        store = open_key_store(settings.key_store, settings.state_dir)
        probe = secrets.token_bytes(16)
        store.set(PROBE_KEY, probe)
        read = store.get(PROBE_KEY)
        store.delete(PROBE_KEY)
    except KeyStoreUnavailable as error:
        return _said(
            "keyring", "keyring", FAIL, str(error),
            'unlock the keyring (log in to the desktop session), or set key_store = "file";'
            " until then sessions live in memory only",
        )  # fmt: skip
    if read != probe:
        return Finding(
            "keyring", "keyring", FAIL, f"{store.description} did not give back what was stored",
            'set key_store = "file", or repair the keyring',
        )  # fmt: skip
    if ": " in store.description:  # a store that works, with a weakness it names
        return _said("keyring", "keyring", WARN, f"stores and reads keys: {store.description}", "")
    return Finding("keyring", "keyring", OK, f"stores and reads keys: {store.description}")


def state_folder(settings: Settings) -> Finding:
    """The state folder: the user's alone, and room left on its disk."""
    folder, name = settings.state_dir, "state folder"
    try:
        check_private_folder(folder)
        check_private_folder(folder / "accounts")
    except UnsafeStorage as error:
        return _said(
            "state", name, FAIL, str(error), "the daemon refuses to start until this is fixed"
        )
    existing = next(f for f in (folder, *folder.parents) if f.exists())
    free = shutil.disk_usage(existing).free
    if free < LOW_SPACE_BYTES:
        return Finding(
            "state", name, WARN, f"only {free >> 20} MB free where {folder} is",
            "free some space: sessions cannot be saved on a full disk",
        )  # fmt: skip
    made = "yours alone" if folder.exists() else "not made yet (the daemon makes it 0700)"
    return Finding("state", name, OK, f"{folder}: {made}, {free >> 20} MB free")


def app_policy(settings: Settings) -> Finding:
    """The per-app policy file: readable as a policy, and editable by the user alone."""
    path, name = settings.app_policy, "app policy"
    if not path.exists():
        return Finding(
            "policy", name, OK, f"no {path}: every app gets new_apps ({settings.new_apps})"
        )
    policy = PolicyFile(path)
    policy.refresh()
    if policy.error:
        return Finding(
            "policy", name, FAIL, policy.error,
            f"fix {path} (`signin-broker apps` shows the rules the daemon uses)",
        )  # fmt: skip
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o022:
        return Finding(
            "policy", name, WARN, f"{path} can be changed by other users (mode {mode:04o})",
            f"run `chmod 600 {path}`",
        )  # fmt: skip
    return Finding(
        "policy", name, OK,
        f"{path}: {len(policy.rules)} app rules; other apps get new_apps ({settings.new_apps})",
    )  # fmt: skip


def token_file_folders(settings: Settings) -> list[Finding]:
    """Each token file's folder: one the daemon may write it in (no symlink, no other writer)."""
    found = []
    for file in settings.token_files:
        name, folder = f"token file {file.name}", file.path.parent
        if not folder.exists():
            seen = f"{folder} does not exist yet; the daemon makes it 0700 at the first write"
            found.append(Finding("tokens", name, OK, seen))
            continue
        try:
            check_token_folder(folder)
        except UnsafeStorage as error:
            found.append(
                _said("tokens", name, FAIL, str(error), "the file is not written until it is fixed")
            )
            continue
        found.append(Finding("tokens", name, OK, f"{folder} is a safe folder for {file.path}"))
    return found


def variables() -> list[Finding]:
    """Each SIGNIN_BROKER_* variable that is no setting: a misspelling the daemon ignores."""
    return [
        Finding(
            "settings",
            variable,
            WARN,
            f"{variable} is set but is no setting: the daemon ignores it",
            f"did you mean {nearest}? (unset {variable})" if nearest else f"unset {variable}",
        )
        for variable, nearest in unknown_variables(os.environ)
    ]


def managed_config(settings: Settings) -> list[Finding]:
    """The organisation's files: read, or gone since an earlier start, or a link to nothing."""
    problems = managed_problems(
        settings.state_dir, settings.managed_files, settings.managed_leading_nowhere, remember=False
    )
    if problems:
        return [_said("settings", "managed config", WARN, said, "") for said in problems]
    if not settings.managed_files:
        return []
    read = ", ".join(map(str, settings.managed_files))
    return [Finding("settings", "managed config", OK, f"read, and safe from other users: {read}")]


def examine(settings: Settings, *, forget: bool = False) -> list[Finding]:
    """Every check, in the order a person fixes them; `forget`: DPoP requirements first."""
    return [
        *([forget_dpop(settings)] if forget else []),
        *variables(),
        *managed_config(settings),
        socket_folder(settings),
        *asyncio.run(providers(settings)),
        key_store(settings),
        state_folder(settings),
        app_policy(settings),
        *token_file_folders(settings),
    ]


def shown(settings: Settings) -> dict[str, Any]:
    """The settings as JSON values (paths of secret files, never what is in them)."""
    return json.loads(json.dumps(dataclasses.asdict(settings), default=str))  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the settings and findings as one JSON object; 2 when the settings are wrong.

    argv: the daemon's flags, after FORGET_DPOP when the person asked for that.
    """
    logging.disable(logging.CRITICAL)  # what the checks find is in the findings
    argv = list(sys.argv[1:] if argv is None else argv)
    forget = argv[:1] == [FORGET_DPOP]
    argv = argv[1:] if forget else argv
    try:
        settings = load(argv)
    except SettingsError as error:
        finding = Finding(
            "settings",
            "settings",
            FAIL,
            str(error),
            "fix the setting (see `signin-brokerd --help`)",
        )
        print(json.dumps({"settings": None, "findings": [dataclasses.asdict(finding)]}))
        return 2
    findings = examine(settings, forget=forget)
    print(
        json.dumps(
            {"settings": shown(settings), "findings": [dataclasses.asdict(f) for f in findings]}
        )
    )
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # a keyring probe still waiting on a prompt must not hold the exit
