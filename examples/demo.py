"""The demo: a daemon on a private socket, then the bundled client asking it for a token."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="signin-broker-demo-"))
    socket_path = folder / "run" / "broker.sock"
    env = {**os.environ, "SIGNIN_BROKER_SOCKET": str(socket_path)}
    step(f"starting signin-brokerd on {socket_path}")
    daemon = subprocess.Popen(
        [BIN / "signin-brokerd", "--issuer", "https://id.example.com"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert daemon.stderr is not None
        for line in daemon.stderr:
            print("   daemon:", line.rstrip())
            if '"msg":"ready"' in line:
                break
        for command in (["status"], ["token"]):
            step("signin-broker " + " ".join(command))
            result = subprocess.run([BIN / "signin-broker", *command], env=env, check=False)
            print(f"   (exit status {result.returncode})")
    finally:
        daemon.terminate()
        daemon.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
