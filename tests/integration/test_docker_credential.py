"""docker's credential-helper protocol, through the real docker-credential-signin-broker."""

from __future__ import annotations

import json
from pathlib import Path

from signin_broker_testing import StubProvider
from support.commands import docker_config as configured
from support.commands import docker_helper as helper
from support.signin import signed_in_daemon
from support.tokens import access_token

REGISTRY = "registry.example.com"


def test_get_list_store_and_erase_round_trips(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    config = configured(folder, f'[registries."{REGISTRY}"]\nusername = "robot"\n')
    got = helper(socket_path, config, "get", f"https://{REGISTRY}/v2/\n")
    assert got.returncode == 0, got.stderr
    first = access_token(socket_path)
    assert json.loads(got.stdout) == {
        "ServerURL": f"https://{REGISTRY}/v2/",
        "Username": "robot",
        "Secret": first,
    }
    listed = helper(socket_path, config, "list", "")
    assert json.loads(listed.stdout) == {REGISTRY: "robot"}
    stored = json.dumps({"ServerURL": REGISTRY, "Username": "robot", "Secret": "whatever"})
    assert helper(socket_path, config, "store", stored).returncode == 0
    refreshes = len(stub.token_requests("refresh_token"))
    assert helper(socket_path, config, "erase", REGISTRY).returncode == 0
    assert len(stub.token_requests("refresh_token")) == refreshes + 1  # renewed
    renewed = json.loads(helper(socket_path, config, "get", REGISTRY).stdout)["Secret"]
    assert renewed != first and renewed == access_token(socket_path)
    daemon.stop()


def test_an_unlisted_registry_gets_dockers_not_found(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    config = configured(folder, f'[registries."{REGISTRY}"]\n')
    other = helper(socket_path, config, "get", "https://elsewhere.example.com/v2/")
    assert (other.returncode, other.stdout) == (1, "credentials not found in native keychain")
    daemon.stop()


def test_a_malformed_config_or_flood_is_a_usage_error(
    stub: StubProvider, socket_path: Path, folder: Path
) -> None:
    daemon = signed_in_daemon(stub, socket_path)
    config = configured(folder, f'[registries."{REGISTRY}"]\npassword = "no"\n')
    bad = helper(socket_path, config, "get", REGISTRY)
    assert bad.returncode == 2 and "takes only" in bad.stderr and bad.stdout == ""
    config = configured(folder / "nested", "x = " + "[" * 5000 + "]" * 5000)
    nested = helper(socket_path, config, "get", REGISTRY)
    assert nested.returncode == 2 and "nests too deeply" in nested.stderr, nested.stderr
    config = configured(folder / "second", f'[registries."{REGISTRY}"]\n')
    flood = helper(socket_path, config, "get", "x" * (65 * 1024))
    assert flood.returncode == 2 and "larger than" in flood.stderr
    daemon.stop()
