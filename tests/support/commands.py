"""The installed console scripts, found beside the interpreter running the tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def signin_broker(
    *args: str,
    timeout: float = 30,
    env: dict[str, str] | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `signin-broker ARGS` to completion, capturing its output; env adds to the environment."""
    return subprocess.run(
        [str(BIN / "signin-broker"), *args],
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def docker_helper(
    socket_path: Path, config: Path, operation: str, given: str
) -> subprocess.CompletedProcess[str]:
    """Run `docker-credential-signin-broker OPERATION` as docker does: `given` on stdin."""
    return subprocess.run(
        [str(BIN / "docker-credential-signin-broker"), "--socket", str(socket_path), operation],
        input=given, capture_output=True, text=True, timeout=30,
        env={**os.environ, "XDG_CONFIG_HOME": str(config)},
    )  # fmt: skip


def docker_config(folder: Path, text: str) -> Path:
    """An XDG_CONFIG_HOME under `folder` whose signin-broker/docker.toml holds `text`."""
    config = folder / "tool-config"
    (config / "signin-broker").mkdir(parents=True)
    (config / "signin-broker" / "docker.toml").write_text(text)
    return config


def curl_json(
    socket_path: Path, method: str, body: str = "{}", *extra: str
) -> tuple[int, dict[str, str]]:
    """A JSON call with curl on a socket (the daemon's or a forward's): the HTTP status and
    the body. `extra`: more of curl's arguments (another header, another method)."""
    done = subprocess.run(
        ["curl", "-s", "-w", "\n%{http_code}", "--unix-socket", str(socket_path),
         "-H", "Content-Type: application/json", "-d", body, *extra,
         f"http://broker/signin_broker.v1.TokenBroker/{method}"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    text, _, code = done.stdout.rpartition("\n")
    return int(code), json.loads(text) if text else {}
