"""The documentation's forwarding recipes name the paths the daemon really uses.

The recipes themselves run in tests/integration/test_forwards.py (ssh -R through sshd;
a bind-mounted socket in namespaces of its own for the containers); what cannot run
here, a dev container and a Flatpak, is held to the daemon's paths.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from signin_broker.daemon.host.forward_sockets import default_forward_path
from signin_broker.locations import APP_NAME, SOCKET_ENV, SOCKET_NAME

SECTION = (Path(__file__).parents[2] / "docs" / "how-to" / "forwarding.md").read_text()
RUNTIME = "/run/user/1000"


def forward_in_runtime(name: str) -> str:
    """A forward's default socket, relative to $XDG_RUNTIME_DIR."""
    daemon_socket = Path(RUNTIME, APP_NAME, SOCKET_NAME)
    return str(default_forward_path(daemon_socket, name).relative_to(RUNTIME))


def recipe(title: str) -> str:
    return SECTION.split(f"**{title}", 1)[1].split("\n**", 1)[0]


def test_the_dev_container_mounts_the_forward_it_opens() -> None:
    text = recipe("A dev container")
    config = json.loads(text[text.index("{") : text.rindex("}") + 1])
    assert "forward --name devcontainer" in config["initializeCommand"]
    (mount,) = config["mounts"]
    assert mount["source"] == "${localEnv:XDG_RUNTIME_DIR}/" + forward_in_runtime("devcontainer")
    assert config["containerEnv"] == {SOCKET_ENV: mount["target"]}


def test_the_flatpak_sees_the_forward_alone_where_its_variable_points() -> None:
    text = recipe("A Flatpak app")
    name = re.search(r"forward --name (\S+)", text)[1]
    assert f"--filesystem=xdg-run/{forward_in_runtime(name)} " in text
    assert f"--env={SOCKET_ENV}={RUNTIME}/{forward_in_runtime(name)}" in text


def test_the_container_and_ssh_recipes_point_the_variable_at_the_socket_they_forward() -> None:
    container = recipe("A container")
    target = re.search(r'-v "\$fwd:(\S+)"', container)[1]
    assert f"-e {SOCKET_ENV}={target} " in container
    ssh = recipe("Over SSH")
    remote = re.search(r'-R (\S+):"\$fwd"', ssh)[1]
    assert f"export {SOCKET_ENV}={remote}\n" in ssh
