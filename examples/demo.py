"""The main job, end to end: stub provider, daemon, a sign-in without a person, a second app.

1. A stub OpenID provider starts on loopback (it approves the test user by itself).
2. signin-brokerd starts on a private socket, configured only with the provider's issuer.
3. App 1, `signin-broker login --no-browser`, begins a sign-in; a scripted browser
   opens the address it prints, and the command returns when the daemon has the session.
4. App 2, a separate program, gets a token over the socket and calls userinfo with it.
5. `signin-broker status` and `accounts` show the state; `logout` ends it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import httpx2

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def pump(stream: object, prefix: str) -> None:
    """Echo a child's stderr lines, indented (keeps its pipe from filling up)."""
    for line in stream:  # type: ignore[attr-defined]
        print(f"   {prefix}: {line.rstrip()}", flush=True)


def browse(url: str) -> None:
    """What a browser does: follow redirects to the provider and back to the daemon."""
    with httpx2.Client(timeout=30) as browser:
        for _ in range(10):
            response = browser.get(url)
            print(f"   browser: GET {response.url.copy_with(query=None)} -> {response.status_code}")
            if "/callback" in url or not response.has_redirect_location:
                return
            url = str(response.url.join(response.headers["location"]))


def run(*args: object, env: dict[str, str]) -> int:
    print("   $ " + " ".join(str(a) for a in args), flush=True)
    return subprocess.run([str(a) for a in args], env=env, check=False).returncode


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="signin-broker-demo-"))
    env = {
        **os.environ,
        "SIGNIN_BROKER_SOCKET": str(folder / "run" / "broker.sock"),
        "XDG_CONFIG_HOME": str(folder / "config"),
        "XDG_STATE_HOME": str(folder / "state"),
    }
    children: list[subprocess.Popen[str]] = []
    try:
        step("1. a stub OpenID provider on loopback")
        stub = subprocess.Popen(
            [sys.executable, "-m", "signin_broker_testing"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        children.append(stub)
        assert stub.stdout is not None
        issuer = json.loads(stub.stdout.readline())["issuer"]
        print(f"   issuer: {issuer}")

        step("2. signin-brokerd, told only the issuer")
        daemon = subprocess.Popen(
            [BIN / "signin-brokerd", "--issuer", issuer, "--http", "127.0.0.1:0"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(daemon)
        assert daemon.stderr is not None
        for line in daemon.stderr:
            print("   daemon:", line.rstrip())
            if "sign-in page ready" in line:
                break
        threading.Thread(target=pump, args=(daemon.stderr, "daemon"), daemon=True).start()

        step("3. app 1 signs in: `signin-broker login --no-browser`")
        login = subprocess.Popen(
            [BIN / "signin-broker", "login", "--no-browser", "--wait", "60"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        children.append(login)
        assert login.stderr is not None
        url = ""
        for line in login.stderr:
            print("   login:", line.rstrip())
            if line.strip().startswith("http://"):
                url = line.strip()
                break
        print(f"   (a scripted browser opens {url})")
        browse(url)
        for line in login.stderr:
            print("   login:", line.rstrip())
        print(f"   login exit status {login.wait(60)}")

        step("4. app 2, a separate program, asks the broker instead of signing in")
        run(sys.executable, HERE / "app_userinfo.py", issuer, env=env)

        step("5. the bundled client")
        run(BIN / "signin-broker", "status", env=env)
        run(BIN / "signin-broker", "accounts", env=env)
        if shutil.which("curl"):  # any tool can ask: unary calls are JSON on the socket too
            run(
                "curl", "-s", "-w", "\\n", "--unix-socket", env["SIGNIN_BROKER_SOCKET"],
                "-H", "Content-Type: application/json", "-d", "{}",
                "http://broker/signin_broker.v1.TokenBroker/ListAccounts",
                env=env,
            )  # fmt: skip
        run(BIN / "signin-broker", "logout", env=env)
        status = run(sys.executable, HERE / "app_userinfo.py", issuer, env=env)
        print(f"   (app 2 after logout: exit status {status}, as it should be)")
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
                child.wait(10)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
